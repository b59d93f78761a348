import BenchSupport
import Foundation

// roomkit-bench: the RoomKit side of the benchmarks (see Benchmarks/bench.py,
// which starts roomd, this program and the Python peer, and writes
// docs/BENCHMARKS.md). Subcommands: client, send, sink, redis-sink, firehose.
let arguments = CommandLine.arguments
let options = Options(arguments.dropFirst(2))
do {
    switch arguments.count > 1 ? arguments[1] : "" {
    case "client": try await runClient(options)
    case "send": try runSender(options)
    case "sink": try await runSink(options)
    case "firehose": try runFirehose(options)
    case "redis-sink": try await runRedisSink(options)
    default:
        note("usage: roomkit-bench client|send|sink|redis-sink|firehose [--option value ...]")
        exit(2)
    }
} catch {
    note("failed: \(error)")
    exit(1)
}
