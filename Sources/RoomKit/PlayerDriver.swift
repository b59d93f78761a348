import Foundation
import Logging
import RoomKitLoop
import RoomKitProtocol

/// The loop side of a `Player`: feeds inputs to its `PlaybackMachine`,
/// performs the actions (slice requests over `HTTPClient`, one timer, frame
/// application through `PlayerStateModel`), keeps the player's cache, and
/// raises the events.
final class PlayerDriver: @unchecked Sendable {
    // @unchecked Sendable: every mutable field is touched on the loop thread
    // only (the player hops there); `player` is set once before the driver
    // is first used, and the loop's door orders that write before any read.

    let loop: EventLoop
    let configuration: PlayerConfiguration
    let server: HTTPURL
    let logger: Logger
    weak var player: Player?
    /// Observers (event logs) and streams. Owned here, not by the `Player`,
    /// so observers still hear a dropped player's last events.
    let broadcaster = EventBroadcaster<PlayerEvent>()

    private var machine: PlaybackMachine
    private var model = PlayerStateModel()
    private var client: HTTPClient?
    private var inFlight: (id: UInt64, request: HTTPClientRequest)?
    private var timer: LoopTimer?
    /// `from` and `to` as the first answer fixed them (`to` defaults to "now").
    private var range: (from: Int64, to: Int64)?
    private var shutdownHookID: Int?
    private var released = false

    init(loop: EventLoop, configuration: PlayerConfiguration, server: HTTPURL, logger: Logger) {
        self.loop = loop
        self.configuration = configuration
        self.server = server
        self.logger = logger
        machine = PlaybackMachine(settings: .init(
            sliceLength: max(1, configuration.sliceDuration.milliseconds), progressInterval: configuration.progressInterval.milliseconds,
            retries: configuration.retries, retryDelay: configuration.retryDelay.milliseconds))
    }

    /// Feeds one input to the machine and performs its actions. Loop thread only.
    func handle(_ input: PlaybackMachine.Input) {
        loop.preconditionInEventLoop()
        guard !released else { return }
        if shutdownHookID == nil {
            shutdownHookID = loop.addShutdownHook { [weak self] in self?.handle(.stop) }
        }
        model.globalStateCheck = player?.globalStateCheck
        let now = Player.now()
        let actions = machine.handle(input, now: now)
        let clock = machine.clock
        var info = machine.timeInfo(at: now)
        if !machine.knowsTimeLine { info.beginTimestamp = configuration.from ?? 0 }
        player?.cache.withLock { cache in
            cache.clock = clock
            cache.info = info
        }
        for action in actions {
            perform(action, now: now)
        }
    }

    private func perform(_ action: PlaybackMachine.Action, now: Int64) {
        switch action {
        case .fetch(let fetch):
            start(fetch)
        case .cancelFetch(let id):
            if let inFlight, inFlight.id == id {
                self.inFlight = nil
                inFlight.request.cancel()
            }
        case .reset(let snapshot):
            // The first frame's state arrives silently: `loadFirstFrame` follows.
            let first = model.state == nil
            var outcome = model.reset(to: snapshot)
            if first { outcome.diff = PlayerStateDiff() }
            report(outcome)
        case .apply(let frames):
            for frame in frames {
                report(model.apply(frame, room: configuration.room))
            }
        case .phase(let phase):
            player?.cache.withLock { $0.phase = phase }
            emit(.phaseChanged(phase))
        case .loadFirstFrame:
            emit(.loadFirstFrame)
        case .sliceChanged(let name):
            emit(.sliceChanged(name))
        case .scheduleTime(let time):
            emit(.scheduleTimeChanged(time))
        case .stoppedWithError(let error):
            logger.warning("player stopped", metadata: ["room": "\(configuration.room)", "error": "\(error)"])
            emit(.stoppedWithError(error))
        case .setTimer(let at):
            arm(after: max(0, at - now))
        case .cancelTimer:
            timer?.stop()
        case .release:
            release()
        }
    }

    /// Updates the cache with the model's state, then raises the outcome's events.
    private func report(_ outcome: PlayerStateModel.Outcome) {
        let state = model.state
        player?.cache.withLock { $0.state = state }
        if !outcome.diff.isEmpty { emit(.playerStateChanged(outcome.diff)) }
        if let magix = outcome.magix { emit(.magix(magix)) }
        if let error = outcome.error {
            emit(.errorWhenAppendFrame(PlayerError(kind: .frameNotDecodable, code: .malformed, message: error)))
        }
    }

    private func emit(_ event: PlayerEvent) {
        broadcaster.yield(event)
        player?.publish(event)
    }

    private func arm(after delay: Int64) {
        do {
            if timer == nil {
                timer = try LoopTimer(loop: loop) { [weak self] _ in self?.handle(.timer) }
            }
            try timer?.start(after: .milliseconds(delay))
        } catch {
            logger.error("player timer failed", metadata: ["error": "\(error)"])
        }
    }

    // MARK: Slices

    /// The recording URL of one slice request.
    func url(for fetch: PlaybackMachine.Fetch) -> HTTPURL {
        var query: [String] = []
        if let from = range?.from ?? configuration.from { query.append("from=\(from)") }
        if let to = range?.to ?? configuration.to { query.append("to=\(to)") }
        query.append("sliceStart=\(fetch.start)")
        query.append("sliceEnd=\(fetch.end)")
        if !fetch.snapshot { query.append("snapshot=0") }
        return HTTPURL(secure: server.secure, host: server.host, port: server.port,
                       path: "/v1/rooms/\(configuration.room)/recording?" + query.joined(separator: "&"))
    }

    private func start(_ fetch: PlaybackMachine.Fetch) {
        if let inFlight {
            self.inFlight = nil
            inFlight.request.cancel()
        }
        if client == nil {
            do {
                // The loop's shared client: players come and go, lws contexts should not.
                client = try HTTPClient.shared(on: loop, configuration: configuration.transport)
            } catch {
                let failure = PlayerError(kind: .network, code: .internalError, message: "no HTTP client: \(error)")
                loop.execute { [weak self] in self?.handle(.failed(id: fetch.id, failure)) }
                return
            }
        }
        guard let client else { return }
        var request: HTTPClientRequest?
        request = client.get(url(for: fetch), headers: [("Authorization", "Bearer \(configuration.token)")],
                             completion: { [weak self] result in
            guard let self, let current = inFlight, current.request === request else { return }
            inFlight = nil
            switch result {
            case .success(let response):
                do throws(PlayerError) {
                    let slice = try RecordingSlice(ndjson: response.body)
                    if range == nil { range = (slice.beginTimestamp, slice.endTimestamp) }
                    handle(.loaded(id: fetch.id, slice))
                } catch {
                    handle(.failed(id: fetch.id, error))
                }
            case .failure(let error):
                handle(.failed(id: fetch.id, PlayerError(error)))
            }
        })
        if let request { inFlight = (fetch.id, request) }
    }

    /// Frees everything once the player has stopped.
    private func release() {
        released = true
        timer?.cancel()
        timer = nil
        if let inFlight {
            self.inFlight = nil
            inFlight.request.cancel()
        }
        client = nil
        if let id = shutdownHookID { loop.removeShutdownHook(id) }
        shutdownHookID = nil
        broadcaster.finish()
    }
}
