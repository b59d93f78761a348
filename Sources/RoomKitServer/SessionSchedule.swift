import RoomKitServerCore

/// Which retained sessions the sweep must look at, and when (issue #26).
///
/// The sweep used to tick every retained session of every room each
/// second: with 300,000 sessions that walk was a fifth of roomd's core, and
/// with 1,000,000 most of it (a few cache misses per session), so roomd's
/// cost per login grew with the sessions it held. Now each session sits in
/// the slot (one sweep period) of the time at or after which its rules may
/// act (`SessionRules.nextTick`), and the sweep ticks only the sessions of
/// the slots that have come. The rules still decide: a session ticked early
/// gets `.none` and is put back; one ticked on time acts as before, at the
/// first sweep at or after its deadline.
///
/// roomd puts a session back after every change of its rules (`persist`,
/// and the sweep's own ticks), and takes it out when it is forgotten. A
/// session forgotten without that (none today) is dropped when its
/// slot comes. Loop thread only (a field of `RoomServer`).
struct SessionSchedule {
    /// The length of a slot (ms): the sweep's period.
    let slot: Int64
    /// Every scheduled session, and the slot it is due in. The only strong
    /// reference the schedule holds.
    private var entries: [ObjectIdentifier: (session: ServerSession, slot: Int64)] = [:]
    /// The sessions due in each slot (ms / `slot`), as keys of `entries`;
    /// a key whose entry has since moved to another slot is skipped.
    private var buckets: [Int64: [ObjectIdentifier]] = [:]
    /// The last slot taken (`takeDue`); nil before the first sweep.
    private var taken: Int64?

    init(slot: Int64 = 1000) {
        self.slot = max(1, slot)
    }

    /// How many sessions are scheduled.
    var count: Int { entries.count }

    /// Schedules `session` for the first sweep at or after `due` (ms),
    /// replacing where it was. A time already taken means the next sweep.
    mutating func schedule(_ session: ServerSession, due: Int64) {
        var index = due >= 0 ? due / slot : 0
        if let taken { index = max(index, taken + 1) }
        let key = ObjectIdentifier(session)
        if entries[key]?.slot == index { return }
        entries[key] = (session, index)
        buckets[index, default: []].append(key)
    }

    /// Takes `session` out (it was forgotten).
    mutating func remove(_ session: ServerSession) {
        entries.removeValue(forKey: ObjectIdentifier(session))
    }

    /// The sessions due at `now` (ms), each once; they leave the schedule
    /// (the caller ticks them and schedules them again).
    mutating func takeDue(now: Int64) -> [ServerSession] {
        let current = max(0, now / slot)
        let slots: [Int64]
        if let taken, current - taken <= 4096 {
            guard current > taken else { return [] }
            slots = Array(taken + 1 ... current)
        } else {
            // The first sweep, or the clock jumped: the slots that hold anything.
            slots = buckets.keys.filter { $0 <= current }.sorted()
        }
        taken = max(taken ?? current, current)
        var due: [ServerSession] = []
        for index in slots {
            guard let keys = buckets.removeValue(forKey: index) else { continue }
            for key in keys {
                guard let entry = entries[key], entry.slot == index else { continue }
                entries.removeValue(forKey: key)
                due.append(entry.session)
            }
        }
        return due
    }
}
