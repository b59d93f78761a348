import Dispatch
import Foundation
import Logging
import RoomKitLoop
import RoomKitProtocol
import Synchronization

/// What a `Player` caches for synchronous reads.
struct PlayerCache: Sendable {
    var phase: PlayerPhase = .waitingFirstFrame
    var clock = PlaybackClock()
    var info = PlayerTimeInfo()
    var state: PlayerState?
    var speed = 1.0
}

/// Plays a room's recording (the whiteboard seed's `WhitePlayer`): the room
/// state at each moment, custom events at their recorded times, at 0.5× to
/// 16×, with pause, seek and stop.
///
/// The player loads the recording from the server's recording endpoint in
/// time slices (docs/PROTOCOL.md "Recording slices"), keeps the next slice
/// loading while it plays, and enters `buffering` when the next slice is
/// not there yet. A seek loads the snapshot at the target (the server starts
/// from its nearest stored snapshot) plus the frames after it; it never
/// replays from the start.
///
/// Every method is safe from any thread; the player runs on `loop`.
/// Synchronous properties read a cache under a lock: when a callback fires,
/// they already show the new state. The `get…` async getters read on the
/// loop, after everything the player did so far. Callbacks are delivered on
/// the loop thread unless `callbackQueue` is given, in which case they are
/// delivered on it, in order. The player starts in `waitingFirstFrame` with
/// an empty state; the first `play()`, `pause()` or `seek` starts loading.
/// `stop()` releases it (so does dropping the last reference).
public final class Player: Sendable {
    /// What is played.
    public let configuration: PlayerConfiguration
    /// The loop the player runs on.
    public let loop: EventLoop
    let cache = LockedValue(PlayerCache())
    let callbackQueue: DispatchQueue?
    private let driver: PlayerDriver
    private let delegateBox: LockedValue<(any PlayerEventDelegate)?>
    private let customGlobalState = LockedValue<PlayerStateModel.GlobalStateCheck?>(nil)
    private weak let host: RoomHost?

    /// Creates a player for `configuration.room` on `loop`. Throws
    /// `.invalidArgument` for a bad server URL, room ID or range.
    public convenience init(loop: EventLoop, configuration: PlayerConfiguration, delegate: (any PlayerEventDelegate)? = nil,
                            callbackQueue: DispatchQueue? = nil,
                            logger: Logger = Logger(label: "roomkit.player")) throws(PlayerError) {
        try self.init(loop: loop, configuration: configuration, delegate: delegate, callbackQueue: callbackQueue,
                      logger: logger, host: nil)
    }

    /// Creates a player on `host`'s loop, server and callback queue; frames
    /// are checked against the host's registered custom global state type.
    public convenience init(host: RoomHost, room: String, token: String, from: Int64? = nil, to: Int64? = nil,
                            delegate: (any PlayerEventDelegate)? = nil,
                            configure: (inout PlayerConfiguration) -> Void = { _ in }) throws(PlayerError) {
        var configuration = PlayerConfiguration(serverURL: host.configuration.serverURL, room: room, token: token,
                                                from: from, to: to)
        configure(&configuration)
        try self.init(loop: host.loop, configuration: configuration, delegate: delegate,
                      callbackQueue: host.callbackQueue, logger: host.logger, host: host)
    }

    private init(loop: EventLoop, configuration: PlayerConfiguration, delegate: (any PlayerEventDelegate)?,
                 callbackQueue: DispatchQueue?, logger: Logger, host: RoomHost?) throws(PlayerError) {
        guard RoomID.isValid(configuration.room) else {
            throw PlayerError(kind: .invalidArgument, code: .invalidArgument, message: "invalid room ID '\(configuration.room)'")
        }
        if let from = configuration.from, let to = configuration.to, from > to {
            throw PlayerError(kind: .invalidArgument, code: .invalidArgument, message: "from is after to")
        }
        let server = try configuration.server()
        self.configuration = configuration
        self.loop = loop
        self.callbackQueue = callbackQueue
        self.host = host
        delegateBox = LockedValue(delegate)
        cache.withLock { $0.info.beginTimestamp = configuration.from ?? 0 }
        driver = PlayerDriver(loop: loop, configuration: configuration, server: server, logger: logger)
        driver.player = self
    }

    deinit {
        // Dropped without stop(): release the loop side (its events go only
        // to observers and streams now).
        let driver = self.driver
        loop.execute { driver.stop() }
    }

    /// The receiver of the player callbacks.
    public var delegate: (any PlayerEventDelegate)? {
        get { delegateBox.withLock { $0 } }
        set { delegateBox.withLock { $0 = newValue } }
    }

    /// The room being played.
    public var room: String { configuration.room }

    // MARK: Synchronous reads (any thread)

    /// Where the player is.
    public var phase: PlayerPhase { cache.withLock { $0.phase } }

    /// The time line; `scheduleTime` is read from the playback clock now.
    public var timeInfo: PlayerTimeInfo {
        let now = Self.now()
        return cache.withLock { cache in
            var info = cache.info
            info.scheduleTime = Int64(cache.clock.time(at: now))
            return info
        }
    }

    /// The playback position, ms after `beginTimestamp`.
    public var scheduleTime: Int64 { timeInfo.scheduleTime }

    /// The room at the current time; nil before the first frame.
    public var state: PlayerState? { cache.withLock { $0.state } }
    /// The parts of `state` (each nil before the first frame).
    public var globalState: [String: JSON]? { cache.withLock { $0.state?.globalState } }
    public var sceneState: SceneState? { cache.withLock { $0.state?.sceneState } }
    public var broadcastState: BroadcastState? { cache.withLock { $0.state?.broadcastState } }
    /// The members in the room at the current time.
    public var members: [Member]? { cache.withLock { $0.state?.members } }

    /// `globalState` decoded as `type` (nil before the first frame).
    public func globalState<T: Decodable>(as type: T.Type) throws -> T? {
        guard let globalState else { return nil }
        return try JSON.object(globalState).decode(type)
    }

    /// Recording ms per real ms, from 0.5 to 16 (values outside are clamped).
    public var playbackSpeed: Double {
        get { cache.withLock { $0.speed } }
        set {
            let speed = min(PlaybackMachine.speeds.upperBound, max(PlaybackMachine.speeds.lowerBound, newValue))
            cache.withLock { $0.speed = speed }
            onLoop { $0.setSpeed(speed) }
        }
    }

    // MARK: Async getters (read on the loop)

    // Each reads on the loop, after everything the player has done so far;
    // throws `LoopError.shutdown` once the loop is gone.

    /// The phase.
    public func getPhase() async throws -> PlayerPhase { try await read { $0.phase } }
    /// The time line.
    public func getTimeInfo() async throws -> PlayerTimeInfo { try await loop.submit { self.timeInfo } }
    /// The room at the current time; nil before the first frame.
    public func getPlayerState() async throws -> PlayerState? { try await read { $0.state } }
    /// The parts of the state (nil before the first frame).
    public func getGlobalState() async throws -> [String: JSON]? { try await read { $0.state?.globalState } }
    public func getSceneState() async throws -> SceneState? { try await read { $0.state?.sceneState } }
    public func getBroadcastState() async throws -> BroadcastState? { try await read { $0.state?.broadcastState } }
    public func getMembers() async throws -> [Member]? { try await read { $0.state?.members } }

    private func read<T: Sendable>(_ body: @escaping @Sendable (PlayerCache) -> T) async throws -> T {
        try await loop.submit { self.cache.withLock { body($0) } }
    }

    // MARK: Control (any thread; takes effect on the loop, in call order)

    /// Plays from the current position (from 0 after `ended`); before the
    /// first frame, loads it and then plays.
    public func play() { onLoop { $0.play() } }

    /// Pauses; before the first frame, loads it and stays paused.
    public func pause() { onLoop { $0.pause() } }

    /// Stops for good and releases the player (phase `stopped`).
    public func stop() { onLoop { $0.stop() } }

    /// Moves to `time` ms after `beginTimestamp` (clamped to the recording):
    /// loads the state there and goes on playing if it was playing.
    public func seek(toScheduleTime time: Int64) { onLoop { $0.seek(to: time) } }

    /// Registers the custom global state type for this player (the seed's
    /// `setCustomGlobalStateClass`): a frame whose `globalState` does not
    /// decode as `type` raises `errorWhenAppendFrame`, and playback goes on.
    /// Without one, a host's registered type applies.
    public func registerGlobalStateType<T: Decodable & SendableMetatype>(_ type: T.Type) {
        let check: @Sendable (JSON) throws -> Void = { json in _ = try json.decode(T.self) }
        customGlobalState.withLock { $0 = ("\(type)", check) }
    }

    var globalStateCheck: PlayerStateModel.GlobalStateCheck? {
        customGlobalState.current ?? host?.globalStateType
    }

    /// Hands `input` to the driver on the loop, after everything asked before.
    private func onLoop(_ input: @escaping @Sendable (PlayerDriver) -> Void) {
        let driver = self.driver
        loop.execute { input(driver) }
    }

    // MARK: Events

    /// Every event, in order, as an `AsyncSequence`. Each call makes a new
    /// subscription that keeps the newest `limit` events; it ends when the
    /// player stops.
    public func events(bufferingNewest limit: Int = 100_000) -> AsyncStream<PlayerEvent> {
        driver.broadcaster.stream(bufferingNewest: limit)
    }

    /// Calls `observer` on the loop thread for every event, synchronously
    /// and in order (for event logs), before the streams and the delegate.
    /// Cancel the token to remove the observer.
    @discardableResult
    public func addObserver(_ observer: @escaping @Sendable (PlayerEvent) -> Void) -> RegistrationToken {
        driver.broadcaster.addObserver(observer)
    }

    /// Like `addObserver`, with the event's one encoding (`EventEncoding`),
    /// shared by every encoded observer and written at most once: the event
    /// log and plugins read the same bytes, as for a host's room events.
    @discardableResult
    public func addEncodedObserver(_ observer: @escaping @Sendable (PlayerEvent, EventEncoding) -> Void) -> RegistrationToken {
        driver.broadcaster.addEncodedObserver(observer)
    }

    /// Hands one event to the delegate (on the callback queue, or now on the
    /// loop). Loop thread only, after the observers and streams.
    func publish(_ event: PlayerEvent) {
        guard let delegate else { return }
        if let callbackQueue {
            callbackQueue.async { event.deliver(to: delegate, player: self) }
        } else {
            event.deliver(to: delegate, player: self)
        }
    }

    /// Milliseconds of the monotonic clock the playback runs on.
    static func now() -> Int64 {
        Int64(DispatchTime.now().uptimeNanoseconds / 1_000_000)
    }
}
