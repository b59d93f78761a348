import RoomKit
import RoomKitProtocol

/// One room's line in `GET /v1/rooms` (CLI.md) plus its last event time.
struct RoomRow: Sendable, Equatable {
    var room: String
    var reason: String
    var phase: String
    var errorCode: Int
    var memberId: Int64?
    var members: Int
    var seq: Int64
    var writable: Bool
    /// ms since epoch of the room's last event-log line since the bot started.
    var lastEventTs: Int64?

    init(room: String, reason: String, phase: String, errorCode: Int, memberId: Int64?, members: Int,
         seq: Int64, writable: Bool, lastEventTs: Int64?) {
        self.room = room
        self.reason = reason
        self.phase = phase
        self.errorCode = errorCode
        self.memberId = memberId
        self.members = members
        self.seq = seq
        self.writable = writable
        self.lastEventTs = lastEventTs
    }

    init(_ room: Room, lastEventTs: Int64?) {
        let c = room.content
        self.init(room: room.id, reason: c.reason.rawValue, phase: c.phase.rawValue, errorCode: Int(c.errorCode.rawValue),
                  memberId: c.memberId, members: Self.members(c), seq: c.seq, writable: c.writable, lastEventTs: lastEventTs)
    }

    /// The room's member count while the bot has a session there; 0 once the
    /// session is over (LOGOUT, KICK_OUT, LOGIN_FAILED, RECONNECT_FAILED): the
    /// cache still holds the last members seen, which the bot no longer knows.
    static func members(_ c: RoomContent) -> Int {
        switch c.reason {
        case .logining, .logined, .reconnecting, .reconnected: return c.members.count
        case .loginFailed, .reconnectFailed, .kickOut, .logout, .logoutFailed: return 0
        }
    }

    var json: JSON {
        ["room": .string(room), "reason": .string(reason), "phase": .string(phase), "errorCode": .int(Int64(errorCode)),
         "memberId": memberId.map(JSON.int) ?? .null, "members": .int(Int64(members)), "seq": .int(seq),
         "writable": .bool(writable), "lastEventTs": lastEventTs.map(JSON.int) ?? .null]
    }
}

/// The paged and filtered form of `GET /v1/rooms` (`?offset=&limit=&filter=`),
/// which the dashboard uses so that 100,000 rooms cost one page per request.
/// Pure logic: rows in, one page out.
struct RoomListing: Sendable, Equatable {
    /// Rows per page when `limit` is not given, and the most a page may hold.
    static let defaultLimit = 100
    static let maxLimit = 1000

    var offset = 0
    var limit = defaultLimit
    /// Whitespace-separated terms, all of which must match: a term matches a
    /// room whose ID contains it, or whose reason or phase equals it (both
    /// case-insensitively).
    var filter = ""

    /// Reads `offset`, `limit` and `filter`; nil when none is present (the
    /// plain CLI.md answer applies). Throws a message naming the bad parameter.
    static func parse(_ request: HTTPRequestQuery) throws(ListingError) -> RoomListing? {
        let offset = request.value("offset"), limit = request.value("limit"), filter = request.value("filter")
        if offset == nil && limit == nil && filter == nil { return nil }
        var listing = RoomListing()
        if let offset {
            guard let value = Int(offset), value >= 0 else { throw ListingError(message: "offset must be an integer >= 0") }
            listing.offset = value
        }
        if let limit {
            guard let value = Int(limit), (1...maxLimit).contains(value) else {
                throw ListingError(message: "limit must be an integer from 1 to \(maxLimit)")
            }
            listing.limit = value
        }
        listing.filter = filter ?? ""
        return listing
    }

    struct ListingError: Error { let message: String }

    /// The page: `{"total","matched","offset","limit","byReason","rooms"}`,
    /// rooms sorted by ID; `byReason` counts every room (not only matches).
    func page(_ rows: [RoomRow]) -> JSON {
        let terms = filter.lowercased().split(whereSeparator: \.isWhitespace).map(String.init)
        var byReason: [String: Int] = [:]
        var matched: [RoomRow] = []
        for row in rows {
            byReason[row.reason, default: 0] += 1
            if terms.isEmpty || Self.matches(row, terms) { matched.append(row) }
        }
        matched.sort { $0.room < $1.room }
        let start = min(offset, matched.count)
        let end = min(start + limit, matched.count)
        return ["total": .int(Int64(rows.count)), "matched": .int(Int64(matched.count)), "offset": .int(Int64(offset)),
                "limit": .int(Int64(limit)), "byReason": .object(byReason.mapValues { .int(Int64($0)) }),
                "rooms": .array(matched[start..<end].map(\.json))]
    }

    private static func matches(_ row: RoomRow, _ terms: [String]) -> Bool {
        let room = row.room.lowercased(), reason = row.reason.lowercased(), phase = row.phase.lowercased()
        return terms.allSatisfy { room.contains($0) || reason == $0 || phase == $0 }
    }
}

/// The query parameters of a request (so `RoomListing.parse` stays pure).
struct HTTPRequestQuery {
    let value: (String) -> String?
}
