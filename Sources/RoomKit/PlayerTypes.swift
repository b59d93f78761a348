import RoomKitLoop
import RoomKitProtocol

/// Where a `Player` is (the whiteboard seed's `WhitePlayerPhase`).
public enum PlayerPhase: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Created; no frame loaded yet (the state is empty). The first `play`,
    /// `pause` or `seek` starts loading.
    case waitingFirstFrame
    /// The clock runs and frames are applied at their recorded times.
    case playing
    /// Paused by `pause()`; `play()` resumes.
    case pause
    /// Wants to play, but the next slice (or a seek's target) is not loaded yet.
    case buffering
    /// Stopped by `stop()` or by an error; the player is released.
    case stopped
    /// Played to the end of the recording; `play()` starts again from 0.
    case ended

    public var description: String { rawValue }
}

/// The recording's time line (the seed's `WhitePlayerTimeInfo`). Times are
/// milliseconds; `scheduleTime` counts from `beginTimestamp`.
public struct PlayerTimeInfo: Sendable, Hashable {
    /// The playback position, ms after `beginTimestamp`.
    public var scheduleTime: Int64
    /// The recording's length in ms (`endTimestamp - beginTimestamp`); 0 until the first slice loaded.
    public var timeDuration: Int64
    /// Frames (room events) in the whole recording; 0 until the first slice loaded.
    public var framesCount: Int
    /// Start of the recording, ms since the epoch; until the first slice
    /// loaded, the configured `from` (or 0).
    public var beginTimestamp: Int64

    public init(scheduleTime: Int64 = 0, timeDuration: Int64 = 0, framesCount: Int = 0, beginTimestamp: Int64 = 0) {
        self.scheduleTime = scheduleTime
        self.timeDuration = timeDuration
        self.framesCount = framesCount
        self.beginTimestamp = beginTimestamp
    }
}

/// The room as it was at the player's current time (the seed's `WhitePlayerState`).
public struct PlayerState: Sendable, Hashable {
    /// The app-defined shared state.
    public var globalState: [String: JSON]
    /// The current directory's scenes and the current scene.
    public var sceneState: SceneState
    /// The view mode and broadcaster.
    public var broadcastState: BroadcastState
    /// The members in the room at that time.
    public var members: [Member]
    /// The published streams.
    public var streams: [MediaStream]
    /// The extra-info map (`setExtraInfo`).
    public var extraInfo: [String: String]

    /// The state a recording snapshot describes.
    public init(snapshot: RoomSnapshot) {
        globalState = snapshot.state.globalState
        sceneState = snapshot.state.sceneState
        broadcastState = snapshot.state.broadcastState
        members = snapshot.members
        streams = snapshot.streams
        extraInfo = snapshot.extraInfo
    }

    /// The room state part (`globalState`, `sceneState`, `broadcastState`).
    public var roomState: RoomState {
        RoomState(globalState: globalState, sceneState: sceneState, broadcastState: broadcastState)
    }
}

/// What a frame (or a seek) changed (`playerStateChanged`): only the
/// top-level keys that changed are set, to their new values.
public struct PlayerStateDiff: Sendable, Hashable {
    // Each set to its new value when it changed; nil when it did not.
    public var globalState: [String: JSON]?
    public var sceneState: SceneState?
    public var broadcastState: BroadcastState?
    public var members: [Member]?
    public var streams: [MediaStream]?
    public var extraInfo: [String: String]?

    /// An empty diff.
    public init() {}

    /// The diff from `old` (nil: nothing before, so every key) to `new`.
    public init(from old: PlayerState?, to new: PlayerState) {
        if old?.globalState != new.globalState { globalState = new.globalState }
        if old?.sceneState != new.sceneState { sceneState = new.sceneState }
        if old?.broadcastState != new.broadcastState { broadcastState = new.broadcastState }
        if old?.members != new.members { members = new.members }
        if old?.streams != new.streams { streams = new.streams }
        if old?.extraInfo != new.extraInfo { extraInfo = new.extraInfo }
    }

    /// The changed top-level keys, in a fixed order (the event log's `keys`).
    public var keys: [String] {
        var keys: [String] = []
        if globalState != nil { keys.append("globalState") }
        if sceneState != nil { keys.append("sceneState") }
        if broadcastState != nil { keys.append("broadcastState") }
        if members != nil { keys.append("members") }
        if streams != nil { keys.append("streams") }
        if extraInfo != nil { keys.append("extraInfo") }
        return keys
    }

    public var isEmpty: Bool { keys.isEmpty }
}

/// Why a player stopped, or why a frame could not be applied.
public struct PlayerError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The failure's kind (extensible).
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        let raw: String
        /// The token was refused (HTTP 401 or 403); `code` is 1002033.
        public static let tokenInvalid = Kind(raw: "tokenInvalid")
        /// The server has no such room (HTTP 404).
        public static let roomNotFound = Kind(raw: "roomNotFound")
        /// The server could not be reached, or the connection dropped.
        public static let network = Kind(raw: "network")
        /// A slice did not arrive in time.
        public static let timedOut = Kind(raw: "timedOut")
        /// The server answered with another error status.
        public static let server = Kind(raw: "server")
        /// The recording is not the NDJSON of PROTOCOL.md §10.
        public static let malformedRecording = Kind(raw: "malformedRecording")
        /// A frame could not be applied, or its `globalState` does not decode
        /// as the registered type (`errorWhenAppendFrame`; playback goes on).
        public static let frameNotDecodable = Kind(raw: "frameNotDecodable")
        /// The player was configured wrongly (URL, room ID, range).
        public static let invalidArgument = Kind(raw: "invalidArgument")
        public var description: String { raw }
    }

    /// What went wrong.
    public let kind: Kind
    /// The seed or protocol code: the server's when it sent one, else 1002033
    /// for token problems, 1002053 for time-outs, 1002051 for network
    /// failures, 1009001 for malformed data, 1009006 for bad arguments.
    public let code: ErrorCode
    /// What happened, for people.
    public let message: String
    /// The HTTP status, when the server answered.
    public let httpStatus: Int?

    public init(kind: Kind, code: ErrorCode, message: String, httpStatus: Int? = nil) {
        self.kind = kind
        self.code = code
        self.message = message
        self.httpStatus = httpStatus
    }

    public var description: String {
        "\(kind) \(code.rawValue): \(message)" + (httpStatus.map { " (HTTP \($0))" } ?? "")
    }

    /// Whether trying the same request again may succeed.
    var isTransient: Bool {
        kind == .network || kind == .timedOut || (kind == .server && (httpStatus ?? 0) >= 500)
    }

    /// Maps an HTTP failure, reading the server's `{"code","message"}` body.
    init(_ error: HTTPClientError) {
        switch error.code {
        case .httpStatus:
            let status = error.status ?? 0
            let body = try? JSON.parse(error.body)
            let message = body?["message"]?.stringValue ?? error.detail
            let serverCode = body?["code"]?.intValue.map(ErrorCode.init(rawValue:))
            switch status {
            case 401, 403:
                self.init(kind: .tokenInvalid, code: .tokenInvalid, message: message, httpStatus: status)
            case 404:
                self.init(kind: .roomNotFound, code: serverCode ?? .invalidArgument, message: message, httpStatus: status)
            default:
                self.init(kind: .server, code: serverCode ?? .internalError, message: message, httpStatus: status)
            }
        case .timedOut:
            self.init(kind: .timedOut, code: .timedOut, message: error.detail)
        case .bodyTooLarge:
            self.init(kind: .malformedRecording, code: .malformed, message: error.detail)
        default:
            self.init(kind: .network, code: .connectionInterrupted, message: "\(error)")
        }
    }
}

/// What a `Player` plays and how (the seed's `WhitePlayerConfig`).
public struct PlayerConfiguration: Sendable {
    /// The server: its `ws://`/`wss://` room URL (as `RoomHostConfiguration`)
    /// or its `http://`/`https://` base URL; only scheme, host and port are used.
    public var serverURL: String
    /// The room whose recording to play.
    public var room: String
    /// A token for that room, any role.
    public var token: String
    /// Start of the recording, ms since the epoch (default: the room's creation).
    public var from: Int64?
    /// End of the recording, ms since the epoch (default: when the first slice is served).
    public var to: Int64?
    /// How much recording each request loads. A seek loads from its target
    /// to the end of the slice it falls in.
    public var sliceDuration: Duration = .seconds(30)
    /// Real time between `scheduleTimeChanged` events while playing.
    public var progressInterval: Duration = .milliseconds(250)
    /// How often a slice request that failed on the network or with a 5xx is
    /// retried (after `retryDelay`) before the player stops with the error.
    public var retries = 2
    /// Wait before such a retry.
    public var retryDelay: Duration = .milliseconds(500)
    /// Time-outs and TLS settings of the HTTP requests.
    public var transport = HTTPClientConfiguration()

    public init(serverURL: String, room: String, token: String, from: Int64? = nil, to: Int64? = nil) {
        self.serverURL = serverURL
        self.room = room
        self.token = token
        self.from = from
        self.to = to
    }

    /// The base of the recording URL: scheme (`ws` read as `http`), host and port.
    func server() throws(PlayerError) -> HTTPURL {
        var text = serverURL
        if text.lowercased().hasPrefix("ws") { text = "http" + text.dropFirst(2) }
        do {
            let url = try HTTPURL(text)
            return HTTPURL(secure: url.secure, host: url.host, port: url.port, path: "/")
        } catch {
            throw PlayerError(kind: .invalidArgument, code: .invalidArgument, message: "bad server URL: \(error.detail)")
        }
    }
}
