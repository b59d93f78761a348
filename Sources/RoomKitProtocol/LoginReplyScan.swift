// The client's login path: a successful login reply (PROTOCOL.md §6) read
// straight from the received bytes, with the byte-level reader of the magix
// scans (MagixPushScan.swift). A bot logging in to a million rooms reads a
// million of these; built as a `JSON` tree of the whole message, then
// decoded, they were a fifth of its loop. As there, the scanner never
// fails, it only declines: whatever it does not answer goes to
// `JSON.parse`, `ServerPush.decode` and `LoginReply(fields:)`, which give
// every error its usual code.

extension LoginReply {
    /// Reads a successful login reply straight from a message's bytes: the
    /// same request id and the same fields that `ServerPush.decode(JSON.parse(bytes))`
    /// and then ``init(fields:)`` give, without a `JSON` tree of the
    /// message. A snapshot's four members (`state`, `members`, `streams`,
    /// `extraInfo`) are each parsed on their own, and only when the reply
    /// carries a snapshot (`recovered` false).
    ///
    /// Returns nil for every other message (another op, a failed reply, a
    /// reply without a login's fields), for anything the full decoder would
    /// refuse, and for forms this scanner does not take (escaped keys, an
    /// escaped `op` or `session`, an integer that is not plain…); decode
    /// those the full way, which also gives their errors. Whenever this
    /// returns a reply, the full decoder succeeds with the same values.
    ///
    /// `memo` keeps the last decoded `state` and `members` with their text:
    /// the same text again (every new room of a bot has the initial state,
    /// and the bot as its one member) is the same value, not decoded again,
    /// and the rooms share its storage.
    public static func scan(_ bytes: ArraySlice<UInt8>, memo: inout SnapshotMemo) -> (id: Int64, reply: LoginReply)? {
        bytes.withUnsafeBufferPointer { buffer -> (id: Int64, reply: LoginReply)? in
            withUnsafeTemporaryAllocation(of: Int.self, capacity: MagixScanner.keyCapacity * 2) { keys in
                var scanner = MagixScanner(bytes: buffer, keys: keys)
                var found = MagixScanner.FoundLoginReply()
                guard scanner.scanMessage(into: &found) else { return nil }
                return found.reply(in: buffer, memo: &memo)
            }
        }
    }

    /// ``scan(_:memo:)`` without a memo kept between calls.
    public static func scan(_ bytes: ArraySlice<UInt8>) -> (id: Int64, reply: LoginReply)? {
        var memo = SnapshotMemo()
        return scan(bytes, memo: &memo)
    }
}

/// The last snapshot `state` and `members` ``LoginReply/scan(_:memo:)``
/// decoded, with their text (canonical text only: the same text is the
/// same value).
public struct SnapshotMemo {
    fileprivate var stateText: [UInt8] = []
    fileprivate var state: RoomState?
    fileprivate var membersText: [UInt8] = []
    fileprivate var members: [Member]?

    public init() {}
}

extension MagixScanner {
    /// A snapshot member's value: where its text is, or its value when the
    /// walk already parsed it (text that is not canonical).
    struct ScannedValue {
        var range: Range<Int> = 0..<0
        var value: JSON?

        func json(in bytes: UnsafeBufferPointer<UInt8>) -> JSON? {
            if let value { return value }
            let text = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(bytes)[range])
            return try? JSON.parse(text, maxDepth: MagixScanner.maxValueDepth)
        }

        /// The text, when canonical (then the same text is the same value).
        func canonicalText(in bytes: UnsafeBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8>? {
            value == nil ? UnsafeBufferPointer(rebasing: bytes[range]) : nil
        }

        /// Whether the value is the text `literal` (`[]`, `{}`).
        func isLiteral(_ literal: StaticString, in bytes: UnsafeBufferPointer<UInt8>) -> Bool {
            guard value == nil, range.count == literal.utf8CodeUnitCount else { return false }
            let text = literal.utf8Start
            for index in 0..<range.count where bytes[range.lowerBound + index] != text[index] { return false }
            return true
        }
    }

    struct FoundLoginReply: MagixMessageFields {
        var id: Int64 = 0
        var session = ""
        var memberId: Int64 = 0
        var seq: Int64 = 0
        var expiresAt: Int64 = 0
        var recovered = false
        var writable = false
        var state = ScannedValue()
        var members = ScannedValue()
        var streams = ScannedValue()
        var extraInfo = ScannedValue()
        var snapshotBits: UInt16 = 0

        /// op 1, id 2, ok 4, session 8, memberId 16, seq 32, recovered 64,
        /// writable 128, expiresAt 256: the fields every login reply has.
        static var required: UInt16 { 511 }
        /// state 512, members 1024, streams 2048, extraInfo 4096: the
        /// snapshot's, required when `recovered` is false.
        static let snapshot: UInt16 = 512 | 1024 | 2048 | 4096

        @inline(__always)
        static func bit(ofKey start: Int, _ stop: Int, in scanner: MagixScanner) -> UInt16 {
            let first = scanner.bytes[start]
            switch stop - start {
            case 2:
                if first == UInt8(ascii: "i") { return scanner.equals(start, stop, "id") ? 2 : 0 }
                if scanner.bytes[start + 1] == UInt8(ascii: "p") { return scanner.equals(start, stop, "op") ? 1 : 0 }
                return scanner.equals(start, stop, "ok") ? 4 : 0
            case 3: return scanner.equals(start, stop, "seq") ? 32 : 0
            case 5: return scanner.equals(start, stop, "state") ? 512 : 0
            case 7:
                if first == UInt8(ascii: "s") {
                    if scanner.bytes[start + 1] == UInt8(ascii: "e") { return scanner.equals(start, stop, "session") ? 8 : 0 }
                    return scanner.equals(start, stop, "streams") ? 2048 : 0
                }
                return scanner.equals(start, stop, "members") ? 1024 : 0
            case 8:
                if first == UInt8(ascii: "m") { return scanner.equals(start, stop, "memberId") ? 16 : 0 }
                return scanner.equals(start, stop, "writable") ? 128 : 0
            case 9:
                if first == UInt8(ascii: "r") { return scanner.equals(start, stop, "recovered") ? 64 : 0 }
                if scanner.bytes[start + 2] == UInt8(ascii: "p") {
                    return scanner.equals(start, stop, "expiresAt") ? 256 : 0
                }
                return scanner.equals(start, stop, "extraInfo") ? 4096 : 0
            default: return 0
            }
        }

        @inline(__always)
        mutating func read(_ bit: UInt16, from scanner: inout MagixScanner) -> Bool {
            switch bit {
            case 1:
                return scanner.scanOp("reply")
            case 2:
                guard let id = scanner.scanInteger() else { return false }
                self.id = id
            case 4:
                return scanner.skipLiteral("true")  // a failed reply goes the full way
            case 8:
                guard let session = scanner.scanPlainString() else { return false }
                self.session = session
            case 16:
                guard let value = scanner.scanInteger() else { return false }
                memberId = value
            case 32:
                guard let value = scanner.scanInteger() else { return false }
                seq = value
            case 256:
                guard let value = scanner.scanInteger() else { return false }
                expiresAt = value
            case 64:
                guard let value = scanner.scanBool() else { return false }
                recovered = value
            case 128:
                guard let value = scanner.scanBool() else { return false }
                writable = value
            case 512, 1024, 2048, 4096:
                let start = scanner.pos
                guard let (canonical, value) = scanner.scanMember() else { return false }
                let scanned = ScannedValue(range: start..<scanner.pos, value: canonical ? nil : value)
                switch bit {
                case 512: state = scanned
                case 1024: members = scanned
                case 2048: streams = scanned
                default: extraInfo = scanned
                }
                snapshotBits |= bit
            default:
                return false  // not a bit of this table
            }
            return true
        }

        /// The reply, its snapshot decoded when it has one; nil declines.
        func reply(in bytes: UnsafeBufferPointer<UInt8>, memo: inout SnapshotMemo) -> (id: Int64, reply: LoginReply)? {
            var snapshot: RoomSnapshot?
            if !recovered {
                guard snapshotBits == Self.snapshot else { return nil }
                do {
                    let stateText = state.canonicalText(in: bytes)
                    let roomState: RoomState
                    if let stateText, let known = memo.state, memo.stateText.elementsEqual(stateText) {
                        roomState = known
                    } else {
                        guard let value = state.json(in: bytes) else { return nil }
                        roomState = try RoomState(json: value)
                        if let stateText { (memo.stateText, memo.state) = (Array(stateText), roomState) }
                    }
                    let membersText = members.canonicalText(in: bytes)
                    let roomMembers: [Member]
                    if let membersText, let known = memo.members, memo.membersText.elementsEqual(membersText) {
                        roomMembers = known
                    } else {
                        guard case .array(let values)? = members.json(in: bytes) else { return nil }
                        roomMembers = try RoomSnapshot.members(values)
                        if let membersText { (memo.membersText, memo.members) = (Array(membersText), roomMembers) }
                    }
                    let streamValues: [JSON]
                    if streams.isLiteral("[]", in: bytes) {
                        streamValues = []
                    } else {
                        guard case .array(let values)? = streams.json(in: bytes) else { return nil }
                        streamValues = values
                    }
                    let infoValues: [String: JSON]
                    if extraInfo.isLiteral("{}", in: bytes) {
                        infoValues = [:]
                    } else {
                        guard case .object(let values)? = extraInfo.json(in: bytes) else { return nil }
                        infoValues = values
                    }
                    snapshot = try RoomSnapshot(state: roomState, members: roomMembers, streams: streamValues,
                                                extraInfo: infoValues)
                } catch {
                    return nil
                }
            }
            return (id, LoginReply(session: session, memberId: memberId, seq: seq, recovered: recovered,
                                   writable: writable, expiresAt: expiresAt, snapshot: snapshot))
        }
    }

    /// `true` or `false` at `pos`.
    mutating func scanBool() -> Bool? {
        if skipLiteral("true") { return true }
        if skipLiteral("false") { return false }
        return nil
    }
}
