import ArgumentParser
import RoomKitServer

/// The `serve` flags that bound what one client can make roomd hold or do
/// (docs/SECURITY.md, "Limits"): recording downloads and their buffers, and
/// the memory of the recovery buffers.
struct LimitOptions: ParsableArguments {
    @Option(name: .customLong("max-recording-downloads"),
            help: "Recording downloads streaming at once; one more is answered HTTP 503.")
    var maxRecordingDownloads = 8
    @Option(name: .customLong("recording-buffer-bytes"),
            help: "Bytes one recording download may have waiting for a slow client before it pauses reading.")
    var recordingBufferBytes = 256 << 10
    @Option(name: .customLong("recovery-bytes-per-room"),
            help: "Bytes of recent events one room keeps in memory for resume (older ones are read from the store).")
    var recoveryBytesPerRoom = 8 << 20
    @Option(name: .customLong("recovery-bytes-total"),
            help: "Bytes of recent events all rooms keep in memory for resume together.")
    var recoveryBytesTotal = 512 << 20

    /// Copies the flags into `configuration`; a value out of range is a `FlagError` (exit 2).
    func apply(to configuration: inout ServerConfiguration) throws {
        guard maxRecordingDownloads >= 1 else {
            throw FlagError(flag: "--max-recording-downloads", problem: "must be a number of downloads >= 1")
        }
        guard recordingBufferBytes >= 4096 else {
            throw FlagError(flag: "--recording-buffer-bytes", problem: "must be at least 4096")
        }
        for (flag, value) in [("--recovery-bytes-per-room", recoveryBytesPerRoom),
                              ("--recovery-bytes-total", recoveryBytesTotal)] where value < 0 {
            throw FlagError(flag: flag, problem: "must be a number of bytes >= 0")
        }
        configuration.recoveryBytesPerRoom = recoveryBytesPerRoom
        configuration.recoveryBytesTotal = recoveryBytesTotal
        configuration.maxRecordingDownloads = maxRecordingDownloads
        configuration.recordingWindowBytes = recordingBufferBytes
    }
}
