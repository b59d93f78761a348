import Foundation
import RoomKit

/// The closing report: what the bot saw, what the tour showed, and how to
/// replay a room with `roombot replay`.
struct Summary {
    /// The embedded roomd's secret: a development server on 127.0.0.1 that
    /// lives only as long as this process (the same convention as `scripts/run.sh`).
    static let devSecret = "dev-secret"

    let lines: [String]

    init(world: World, report: TourReport, elapsed: Double, options: DemoOptions) {
        let stats = world.stats
        var lines = ["", "══ summary ══"]
        if let failure = report.failure {
            lines.append("tour: stopped after \(report.stepsDone.count) of 9 steps: \(failure)")
        } else {
            lines.append("tour: all \(report.stepsDone.count) steps done")
        }
        let rooms = stats.rooms
        lines.append("rooms: " + rooms.map { "\($0.id)\($0.count.server == "main" ? "" : " (\($0.count.server))")" }
            .joined(separator: ", "))
        lines.append(String(format: "events: %d received by the bot in %.1f s (%.0f/s on average, peak %.0f/s), %d of them magix",
                            stats.total, elapsed, elapsed > 0 ? Double(stats.total) / elapsed : 0, stats.peak, stats.magix))
        lines.append("per room: " + rooms.map { "\($0.id) \($0.count.events)" }.joined(separator: " · "))
        let reasons = stats.reasons
        let counted = RoomReason.allCases.map { "\($0) ×\(reasons[$0] ?? 0)" }
        lines.append("reasons: " + counted.prefix(5).joined(separator: " · "))
        lines.append("         " + counted.dropFirst(5).joined(separator: " · "))
        let missing = RoomReason.allCases.filter { reasons[$0] == nil }
        lines.append(missing.isEmpty ? "every reason seen: all 9"
                                     : "reasons not seen: " + missing.map(\.rawValue).joined(separator: ", "))
        if report.missed > 0 {
            lines.append("connection drop: RECONNECTING → RECONNECTED; recovered \(report.recovered) missed events "
                + "(\(report.recoveredMagix)/\(report.missedMagix) magix, \(report.duplicates) duplicates)")
        }
        if let pong = report.pong { lines.append("C plugin echo-commands: !ping → \(pong)") }
        if let rewritten = report.rewritten { lines.append("URL plugin url-rewrite: \(rewritten.from) → \(rewritten.to)") }
        lines.append("plugins: " + world.plugins.reports.map { "\($0.name) \($0.status.rawValue), \($0.calls) calls, \($0.failures) failures" }
            .joined(separator: " · "))
        lines.append("replay a room: " + Self.replayHint(world: world, options: options))
        if world.embedded != nil && !options.forever {
            lines.append("  (the embedded roomd and its data end with this run: use --forever to replay while it runs,")
            lines.append("   or run against your own roomd with --server URL --secret S)")
        }
        self.lines = lines
    }

    /// `roombot replay …` for the lobby, with a reader token minted by `roomd token`
    /// (the command prints no token; the shell passes it along).
    static func replayHint(world: World, options: DemoOptions) -> String {
        let directory = ExampleManifest.executableDirectory
        func tool(_ name: String) -> String {
            FileManager.default.isExecutableFile(atPath: directory + "/" + name) ? directory + "/" + name : name
        }
        let secret = options.server == nil ? devSecret : "<secret>"
        return "\(tool("roombot")) replay --server \(world.serverURL) --room lobby --token "
            + "\"$(\(tool("roomd")) token --secret \(secret) --user viewer --room lobby --role reader)\""
    }
}
