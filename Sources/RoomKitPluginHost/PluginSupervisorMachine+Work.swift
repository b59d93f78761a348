extension PluginSupervisorMachine {
    /// A running child's work as the bot's frames and its answers show it:
    /// the records written (`sent`) and finished (DONE), when the oldest
    /// unfinished record became the head (written to an idle child, or its
    /// predecessor's DONE), the unanswered requests and PING. This is all
    /// `tick` reads (inputs: `sent`, `requested`, `frame(.done/.answer/.pong)`, `tick`'s own PING).
    struct Work: Equatable, Sendable {
        /// The last record written, and the last one a DONE covered.
        var sentThrough: UInt64 = 0
        var doneThrough: UInt64 = 0
        /// When the head record (the first one after `doneThrough`) became the head (ns).
        var headSince: UInt64 = 0
        /// `doneThrough` when the head was judged late: one failure per call.
        var lateAfter: UInt64?
        /// When the unanswered PING was sent (0: none).
        var pingSentAt: UInt64 = 0
        /// URL and state requests not answered yet, and since when the oldest waits (ns).
        var requests = 0
        var requestSince: UInt64 = 0

        /// Records written and not yet covered by a DONE.
        var outstanding: Bool { sentThrough > doneThrough }
    }

    /// What the watchdog's `tick` decided (see `tick(now:)`).
    enum TickResult: Equatable {
        case nothing
        /// The first record after `after` (the last one DONE covered) is late: count it as one failure.
        case late(after: UInt64)
        /// Send a PING (the machine noted it as sent at `now`).
        case ping
        case kill(reason: String)
    }
}
