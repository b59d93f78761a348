// The time window of a recording request (PROTOCOL.md §10 and the "Recording
// slices" extension of docs/PROTOCOL.md), computed from the query once and
// without I/O, so its arithmetic is tested and fuzzed on its own.

/// The window a `GET /v1/rooms/{room}/recording` asks for: `from`/`to` (ms
/// since the epoch) and the slice `sliceStart`/`sliceEnd` (ms after `from`,
/// half-open). Every number is checked through ``ExternalNumber`` (epoch
/// times and offsets within year 9999), so no sum below can overflow.
public struct RecordingWindow: Sendable, Hashable {
    /// `beginTimestamp`: `from`, or the room's creation.
    public let begin: Int64
    /// `endTimestamp`: `to`, or now.
    public let end: Int64
    /// The slice's start as answered: the asked start, at most `end - begin`.
    public let sliceStart: Int64
    /// The slice's end as asked (`end - begin + 1` when not given).
    public let sliceEnd: Int64
    /// The first frame time in the slice (inclusive).
    public let sliceFrom: Int64
    /// The last frame time in the slice (inclusive; below `sliceFrom` when empty).
    public let sliceTo: Int64

    /// The `sliceEnd` the header reports: at most `end - begin + 1`.
    public var answeredSliceEnd: Int64 { min(sliceEnd, end - begin + 1) }

    /// Whether the slice covers the whole window (then `framesCount` is the
    /// slice's own count).
    public var isWhole: Bool { sliceStart == 0 && sliceTo == end }

    /// Checks and combines the query's numbers.
    ///
    /// - Parameters:
    ///   - value: the percent-decoded value of a query parameter, or nil.
    ///   - created: the room's creation time (the default `from`), ms.
    ///   - now: the current wall time (the default `to`), ms.
    /// - Throws: a 1009006 ``ProtocolError`` naming the parameter and its range.
    public init(query value: (String) -> String?, created: Int64, now: Int64) throws(ProtocolError) {
        func number(_ name: String, _ range: ClosedRange<Int64>) throws(ProtocolError) -> Int64? {
            guard let text = value(name) else { return nil }
            do {
                return try ExternalNumber.integer(text, field: name, in: range)
            } catch {
                throw error.protocolError
            }
        }
        let clamp = ExternalNumber.epochMilliseconds
        let begin = try number("from", ExternalNumber.epochMilliseconds) ?? min(max(created, clamp.lowerBound), clamp.upperBound)
        let end = try number("to", ExternalNumber.epochMilliseconds) ?? min(max(now, clamp.lowerBound), clamp.upperBound)
        guard begin <= end else { throw .invalidArgument("from is after to") }
        let askedStart = try number("sliceStart", ExternalNumber.offsetMilliseconds) ?? 0
        let sliceEnd = try number("sliceEnd", ExternalNumber.offsetMilliseconds) ?? (end - begin + 1)
        guard askedStart <= sliceEnd else { throw .invalidArgument("need 0 <= sliceStart <= sliceEnd") }
        self.begin = begin
        self.end = end
        self.sliceEnd = sliceEnd
        // A slice starting past the end starts at the end (its last frames).
        sliceStart = min(askedStart, end - begin)
        sliceFrom = begin + sliceStart
        sliceTo = min(end, begin + sliceEnd - 1)
    }
}
