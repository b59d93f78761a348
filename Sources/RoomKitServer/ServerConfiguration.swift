import Foundation

/// Everything `roomd` can be told. Times are `Duration`s so tests can shrink
/// the seed's 90 s heartbeat timeout and 20 min retention.
public struct ServerConfiguration: Sendable {
    /// Address and port to listen on (port 0 picks a free one).
    public var host = "127.0.0.1"
    /// A second, plain-HTTP listener for `/metrics`, `/healthz` and the
    /// admin API (nil: none, and the public listener serves them). When set,
    /// the public listener answers those paths (except `/healthz`) with 404.
    public var adminHost: String?
    /// The admin listener's port (0 picks a free one).
    public var adminPort = 0
    /// The `version` label of `roomd_build_info` in `/metrics`.
    public var buildVersion = "unknown"
    /// The `revision` label of `roomd_build_info` (a git commit).
    public var buildRevision = "unknown"
    public var port = 7700
    /// HS256 secret shared with the app's backend.
    public var secret: String
    /// Directory of the SQLite database (created if missing).
    public var dataDirectory: String
    /// How often clients should ping (`hello.heartbeatInterval`).
    public var heartbeatInterval: Duration = .seconds(10)
    /// Silence after which a connection is dead and, once its connection is
    /// gone, after which a member leaves its rooms.
    public var heartbeatTimeout: Duration = .seconds(90)
    /// How long a lost session stays resumable.
    public var sessionRetention: Duration = .seconds(1200)
    /// TLS certificate and key (PEM); both set means `wss://`.
    public var tlsCertificateFile: String?
    public var tlsKeyFile: String?
    /// Largest message accepted (larger: close 1009).
    public var maxMessageBytes = 1 << 20
    /// Requests per connection: bucket size and refill per second.
    public var rateLimitBurst = 200.0
    public var rateLimitPerSecond = 200.0
    /// The request bucket of a service connection (one whose `hello` carried
    /// a valid `service` token): a bot host logging in or resuming many rooms
    /// on one connection (docs/PROTOCOL.md "Service connections").
    public var serviceRateLimitBurst = 100_000.0
    public var serviceRateLimitPerSecond = 100_000.0
    /// Continuous time over the limit after which the connection is closed 1008.
    public var rateLimitGrace: Duration = .seconds(2)
    /// Outbound bytes queued per connection before it is closed 1013.
    public var maxOutboundBytes = 8 << 20
    /// Most WebSocket connections open at once; a WebSocket upgrade beyond
    /// it is refused with HTTP 503 (docs/PROTOCOL.md). HTTP requests are not counted.
    public var maxConnections = 10_000
    /// Most WebSocket connections open at once from one remote address
    /// (behind a reverse proxy every client has the proxy's address).
    public var maxConnectionsPerAddress = 1_000
    /// Events kept in memory per room for resume (at least this many...).
    public var recoveryEvents = 1000
    /// ...or at least this much time, whichever keeps more.
    public var recoveryWindow: Duration = .seconds(300)
    /// Bytes of pushes a room's recovery buffer keeps in memory; older
    /// recoverable events are read back from the store on resume.
    public var recoveryBytesPerRoom = 8 << 20
    /// Bytes of pushes all recovery buffers keep in memory together.
    public var recoveryBytesTotal = 512 << 20
    /// Notice before a token expires (`tokenWillExpire`).
    public var tokenExpiryNotice: Duration = .seconds(30)
    /// A snapshot is stored every this many events per room (bounds restart
    /// and recording-seek cost).
    public var snapshotEvery = 200
    /// SQLite `synchronous`: normal survives process crashes, full also power loss.
    public var synchronousFull = false
    /// Group commit's deadline: a transaction open this long is committed
    /// (and what it held released) before the next message is read, even in
    /// the middle of a loop turn, so a reply waits for at most this much
    /// work of others (`roomd serve --commit-deadline`). 10 ms, not 1 ms:
    /// each mid-turn commit writes its rooms' B-tree pages to the WAL again,
    /// which cost ~10 us of CPU per append at 1 ms and ~3 us at 10 ms
    /// (docs/BENCHMARKS.md, "roomd's append path").
    public var commitDeadline: Duration = .milliseconds(10)
    /// Most recording downloads streaming at once; one more is answered 503
    /// (code 1009004). Each holds a reader thread and a SQLite connection.
    public var maxRecordingDownloads = 8
    /// Bytes a recording download may have waiting for its client before
    /// its reader pauses (the pacing window; a download holds about this
    /// plus one chunk, whatever the room's size).
    public var recordingWindowBytes = 256 << 10
    /// Frame lines are read from the store and queued in chunks of about this size.
    public var recordingChunkBytes = 64 << 10
    /// For tests only: answer every recording request this much later, to
    /// play a slow server (a player then shows `buffering`). Nil in production.
    public var recordingDelay: Duration?

    public init(secret: String, dataDirectory: String) {
        self.secret = secret
        self.dataDirectory = dataDirectory
    }
}


/// A random identifier like `s-3f9a…` (16 hex digits).
func randomIdentifier(_ prefix: String) -> String {
    var generator = SystemRandomNumberGenerator()
    return prefix + String(UInt64.random(in: 0...UInt64.max, using: &generator), radix: 16)
}

/// A session ID: `s-`, the time `now` (ms) as 12 hex digits, then a random
/// 64-bit value (`random`, from a `RandomPool`) in hex. Still unguessable,
/// but IDs made later sort later, so the sessions table (keyed by ID) grows
/// at its right edge: a turn of logins dirties a few B-tree pages instead
/// of one page per login.
func sessionIdentifier(now: Int64, random: UInt64) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var bytes: [UInt8] = [UInt8(ascii: "s"), UInt8(ascii: "-")]
    bytes.reserveCapacity(2 + 16 + 16)
    var time = UInt64(max(0, now))
    let timeDigits = max(12, (64 - time.leadingZeroBitCount + 3) / 4)
    for shift in stride(from: (timeDigits - 1) * 4, through: 0, by: -4) {
        bytes.append(digits[Int((time >> UInt64(shift)) & 15)])
    }
    time = random
    let randomDigits = max(1, (64 - time.leadingZeroBitCount + 3) / 4)
    for shift in stride(from: (randomDigits - 1) * 4, through: 0, by: -4) {
        bytes.append(digits[Int((time >> UInt64(shift)) & 15)])
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// Random 64-bit values from the kernel's CSPRNG (glibc's `arc4random_buf`,
/// on getrandom), fetched 512
/// at a time: `SystemRandomNumberGenerator` makes one system call per
/// value, and roomd makes a session ID per login (2.4% of its loop while a
/// million rooms logged in). Owned by one thread (the server's loop).
struct RandomPool {
    private var values = [UInt64](repeating: 0, count: 512)
    private var used = 512

    mutating func next() -> UInt64 {
        if used == values.count {
            values.withUnsafeMutableBytes { buffer in
                arc4random_buf(buffer.baseAddress!, buffer.count)  // glibc: getrandom, never fails
            }
            used = 0
        }
        defer { used += 1 }
        return values[used]
    }
}
