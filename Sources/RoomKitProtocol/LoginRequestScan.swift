// The server's login path: a `login` request (PROTOCOL.md §6) read straight
// from the received bytes, with the byte-level reader of the magix scans
// (MagixPushScan.swift); `user` and `resume` are walked as messages of
// their own over their bytes. A bot joining a million rooms sends a million
// of these, and after a roomd restart it sends them all again at once. As
// there, the scanner never fails, it only declines: whatever it does not
// answer goes to `JSON.parse` and `ClientEnvelope.decode`, which give every
// error its usual code.

extension ClientEnvelope {
    /// Reads a `login` request straight from a message's bytes: the same
    /// envelope `decode(JSON.parse(bytes))` gives, without a `JSON` tree of
    /// the message.
    ///
    /// Returns nil for every other message, for anything the full decoder
    /// would refuse, and for forms this scanner does not take (escaped keys
    /// or strings, an integer that is not plain, a `null` member…); decode
    /// those with ``decode(_:)``, which also gives their errors. Whenever
    /// this returns an envelope, the full decoder gives the same one.
    public static func scanLogin(_ bytes: [UInt8]) -> ClientEnvelope? {
        bytes.withUnsafeBufferPointer { buffer -> ClientEnvelope? in
            withUnsafeTemporaryAllocation(of: Int.self, capacity: MagixScanner.keyCapacity * 2) { keys in
                var scanner = MagixScanner(bytes: buffer, keys: keys)
                var found = MagixScanner.FoundLogin()
                guard scanner.scanMessage(into: &found) else { return nil }
                return found.envelope(in: buffer, keys: keys)
            }
        }
    }
}

extension MagixScanner {
    struct FoundLogin: MagixMessageFields {
        var id: Int64 = 0
        var room = ""
        var token = ""
        var user: Range<Int> = 0..<0
        var writable = true
        var resume: Range<Int>?
        var fence: Int64?

        /// op, id, room, token, user (writable, resume and fence may be absent).
        static var required: UInt16 { 31 }

        /// op 1, id 2, room 4, token 8, user 16, writable 32, resume 64, fence 128.
        @inline(__always)
        static func bit(ofKey start: Int, _ stop: Int, in scanner: MagixScanner) -> UInt16 {
            switch stop - start {
            case 2:
                if scanner.bytes[start] == UInt8(ascii: "o") { return scanner.equals(start, stop, "op") ? 1 : 0 }
                return scanner.equals(start, stop, "id") ? 2 : 0
            case 4:
                if scanner.bytes[start] == UInt8(ascii: "r") { return scanner.equals(start, stop, "room") ? 4 : 0 }
                return scanner.equals(start, stop, "user") ? 16 : 0
            case 5:
                if scanner.bytes[start] == UInt8(ascii: "t") { return scanner.equals(start, stop, "token") ? 8 : 0 }
                return scanner.equals(start, stop, "fence") ? 128 : 0
            case 6: return scanner.equals(start, stop, "resume") ? 64 : 0
            case 8: return scanner.equals(start, stop, "writable") ? 32 : 0
            default: return 0
            }
        }

        @inline(__always)
        mutating func read(_ bit: UInt16, from scanner: inout MagixScanner) -> Bool {
            switch bit {
            case 1:
                return scanner.scanOp("login")
            case 2:  // a positive integer as written (decode also takes 7.0; left to it)
                guard let id = scanner.scanInteger(), id > 0 else { return false }
                self.id = id
            case 4:
                guard let room = scanner.scanRoomID() else { return false }
                self.room = room
            case 8:
                guard let token = scanner.scanPlainString() else { return false }
                self.token = token
            case 16, 64:  // objects, walked on their own afterwards
                guard scanner.bytes[scanner.pos] == UInt8(ascii: "{") else { return false }
                let start = scanner.pos
                guard scanner.scanMember() != nil else { return false }
                if bit == 16 { user = start..<scanner.pos } else { resume = start..<scanner.pos }
            case 32:
                guard let value = scanner.scanBool() else { return false }
                writable = value
            case 128:
                guard let value = scanner.scanInteger(), value >= 0 else { return false }
                fence = value
            default:
                return false  // not a bit of this table
            }
            return true
        }

        /// The envelope, `user` and `resume` walked and checked as
        /// `decodeLogin` checks them; nil declines.
        func envelope(in bytes: UnsafeBufferPointer<UInt8>, keys: UnsafeMutableBufferPointer<Int>) -> ClientEnvelope? {
            var userFields = FoundUser()
            var userScanner = MagixScanner(bytes: UnsafeBufferPointer(rebasing: bytes[user]), keys: keys)
            guard userScanner.scanMessage(into: &userFields), UserID.isValid(userFields.id) else { return nil }
            if let name = userFields.name, name.utf8.count > ProtocolLimits.maxUserNameBytes { return nil }
            var payload: JSON?
            if let scanned = userFields.payload {
                guard let value = scanned.json(in: UnsafeBufferPointer(rebasing: bytes[user])) else { return nil }
                payload = value
            }
            var point: ResumePoint?
            if let resume {
                var resumeFields = FoundResume()
                var resumeScanner = MagixScanner(bytes: UnsafeBufferPointer(rebasing: bytes[resume]), keys: keys)
                guard resumeScanner.scanMessage(into: &resumeFields),
                      TextRules.hasLength(resumeFields.session, atMost: ProtocolLimits.maxSessionBytes),
                      resumeFields.seq >= 0 else { return nil }
                point = ResumePoint(session: resumeFields.session, seq: resumeFields.seq)
            }
            let request = LoginRequest(token: token, user: LoginUser(id: userFields.id, name: userFields.name, payload: payload),
                                       writable: writable, resume: point, fence: fence)
            return ClientEnvelope(id: id, room: room, request: .login(request))
        }
    }

    /// A login's `user`: `{id, name?, payload?}`.
    struct FoundUser: MagixMessageFields {
        var id = ""
        var name: String?
        /// The payload: its text in the user object, or its value when the
        /// walk parsed it (not canonical).
        var payload: ScannedValue?

        static var required: UInt16 { 1 }

        /// id 1, name 2, payload 4.
        @inline(__always)
        static func bit(ofKey start: Int, _ stop: Int, in scanner: MagixScanner) -> UInt16 {
            switch stop - start {
            case 2: return scanner.equals(start, stop, "id") ? 1 : 0
            case 4: return scanner.equals(start, stop, "name") ? 2 : 0
            case 7: return scanner.equals(start, stop, "payload") ? 4 : 0
            default: return 0
            }
        }

        @inline(__always)
        mutating func read(_ bit: UInt16, from scanner: inout MagixScanner) -> Bool {
            switch bit {
            case 1:
                guard let id = scanner.scanPlainString() else { return false }
                self.id = id
            case 2:  // a string (a null name is left to the full decoder)
                guard let name = scanner.scanPlainString() else { return false }
                self.name = name
            case 4:  // a null payload reads as absent there: left to it
                guard scanner.bytes[scanner.pos] != UInt8(ascii: "n"), let scanned = scanner.scanPayload() else { return false }
                payload = ScannedValue(range: scanned.range, value: scanned.canonical ? Optional<JSON>.none : .some(scanned.value))
            default:
                return false
            }
            return true
        }
    }

    /// A login's `resume`: `{session, seq}`.
    struct FoundResume: MagixMessageFields {
        var session = ""
        var seq: Int64 = 0

        static var required: UInt16 { 3 }

        /// session 1, seq 2.
        @inline(__always)
        static func bit(ofKey start: Int, _ stop: Int, in scanner: MagixScanner) -> UInt16 {
            switch stop - start {
            case 7: return scanner.equals(start, stop, "session") ? 1 : 0
            case 3: return scanner.equals(start, stop, "seq") ? 2 : 0
            default: return 0
            }
        }

        @inline(__always)
        mutating func read(_ bit: UInt16, from scanner: inout MagixScanner) -> Bool {
            switch bit {
            case 1:
                guard let session = scanner.scanPlainString() else { return false }
                self.session = session
            case 2:
                guard let seq = scanner.scanInteger() else { return false }
                self.seq = seq
            default:
                return false
            }
            return true
        }
    }
}
