import RoomKitLoop
import RoomKitProtocol

// Recording downloads (PROTOCOL.md §10): streamed from the store by a
// `RecordingDownload` each, at most `maxRecordingDownloads` at once.
extension RoomServer {
    /// Starts streaming `request` to `responder`, or answers 503 (code
    /// 1009004) when `maxRecordingDownloads` are already running. Loop thread only.
    func startRecording(_ request: RecordingRequest, responder: HTTPResponder) {
        loop.preconditionInEventLoop()
        guard recordings.active.count < configuration.maxRecordingDownloads else {
            recordings.refused += 1
            logger.debug("recording download refused", metadata: [
                "room": "\(request.room)", "running": "\(recordings.active.count)",
            ])
            responder.respond(status: 503, text: JSON.object([
                "code": .int(Int64(ErrorCode.rateLimited.rawValue)),
                "message": .string("too many recording downloads at once "
                    + "(--max-recording-downloads \(configuration.maxRecordingDownloads)), try again later"),
            ]).jsonString)
            return
        }
        let download = RecordingDownload(
            request: request, responder: responder, loop: loop, logger: logger, databasePath: store.db.path,
            windowBytes: configuration.recordingWindowBytes, chunkBytes: configuration.recordingChunkBytes,
            onBuffered: { [weak self] bytes in
                guard let self else { return }
                recordings.peakBufferedBytes = max(recordings.peakBufferedBytes, bytes)
            },
            onEnd: { [weak self] download in self?.recordings.active[ObjectIdentifier(download)] = nil })
        recordings.active[ObjectIdentifier(download)] = download
        download.start()
    }

    /// Ends every download (the server stops): their readers return.
    func endRecordings() {
        for download in recordings.active.values { download.end() }
        recordings.active.removeAll()
    }
}
