import Foundation

/// Workload 5 for the NIO peer, as peers/peer_plugins.py for the Python
/// peer: what one handler call costs. A no-op handler closure called
/// directly (`call_ns`), called after decoding the 75-byte message with
/// JSONDecoder into a `JSONValue` (`decode_call_ns`: what json.loads + call
/// is on the Python side), and a dispatch loop over three handlers
/// (`dispatch_ns`, per handler call); ns per call, best of three runs.
enum HandlerCalls {
    @inline(never)
    static func noopHandler(_ kind: Kind, _ room: String, _ message: Incoming) {}

    static func run(iterations: Int) throws {
        let text = #"{"room":"room-1","from":12,"event":"bench","payload":{"t":123456789012345}}"#
        let data = Data(text.utf8)
        let decoder = JSONDecoder()
        var message = Incoming()
        message.op = "magix"
        message.room = "room-1"
        message.payload = try decoder.decode(JSONValue.self, from: data)
        // Through an array of closures, as the connection holds its plugins:
        // the optimiser cannot see the callee.
        let handlers: [Plugin] = Array(repeating: { noopHandler($0, $1, $2) }, count: 3)
        let handler = handlers[0]
        func bestOfThree(_ count: Int, _ body: (Int) throws -> Void) rethrows -> Double {
            var best = Double.infinity
            for _ in 0..<3 {
                let start = monotonicNanos()
                try body(count)
                best = min(best, Double(monotonicNanos() - start) / Double(count))
            }
            return best
        }
        let direct = bestOfThree(iterations) { count in
            for _ in 0..<count { handler(.magix, "room-1", message) }
        }
        let decoded = try bestOfThree(iterations / 10) { count in
            for _ in 0..<count {
                var fresh = message
                fresh.payload = try decoder.decode(JSONValue.self, from: data)
                handler(.magix, "room-1", fresh)
            }
        }
        let dispatch = bestOfThree(iterations) { count in
            for _ in 0..<(count / 3) {
                for handler in handlers { handler(.magix, "room-1", message) }
            }
        }
        emit(["call_ns": direct, "decode_call_ns": decoded, "dispatch_ns": dispatch])
    }
}
