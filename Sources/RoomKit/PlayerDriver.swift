import Foundation
import Logging
import RoomKitLoop
import RoomKitProtocol

/// The loop side of a `Player`: feeds inputs to its `PlaybackMachine`,
/// performs what each input led to (slice requests over `HTTPClient`, one
/// timer, frame application through `PlayerStateModel`) in the order it
/// owns, keeps the player's cache, and raises the events.
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

    // MARK: Inputs

    // One method per machine input, each switching over exactly what its
    // input can lead to. The driver owns the order of the effects and keeps
    // one order for every result: an abandoned request is dropped first;
    // then the state (a snapshot and `loadFirstFrame`, then the frames due),
    // the phase and the time, so whoever sees phaseChanged or
    // scheduleTimeChanged(t) reads the state at t; then new requests and the
    // timer, which nothing a user sees waits on (an HTTP completion never
    // runs inside the call that starts it). What the clock did (`Progress`)
    // comes after the input's own part, in that order again. Loop thread
    // only; nothing happens once released.

    /// `Player.play()`.
    func play() {
        guard let now = begin() else { return }
        let action = machine.play(now: now)
        cacheTimeLine(now)
        switch action {
        case .loading(let fetch, let progress):
            if let fetch { start(fetch) }
            perform(progress, now: now)
        case .playing(let time, let progress):
            enter(.playing)
            if let time { emit(.scheduleTimeChanged(time)) }
            perform(progress, now: now)
        case .buffering(let fetch, let progress):
            enter(.buffering)
            if let fetch { start(fetch) }
            perform(progress, now: now)
        case .restarted(let seek, let progress):
            perform(seek)
            perform(progress, now: now)
        case .progressed(let progress):
            perform(progress, now: now)
        case .none:
            break
        }
    }

    /// `Player.pause()`.
    func pause() {
        guard let now = begin() else { return }
        let action = machine.pause(now: now)
        cacheTimeLine(now)
        switch action {
        case .loading(let fetch, let progress):
            if let fetch { start(fetch) }
            perform(progress, now: now)
        case .paused(let time, let progress):
            enter(.pause)
            if let time { emit(.scheduleTimeChanged(time)) }
            perform(progress, now: now)
        case .progressed(let progress):
            perform(progress, now: now)
        case .none:
            break
        }
    }

    /// `Player.stop()`, the loop's shutdown, or the player dropped.
    func stop() {
        guard let now = begin() else { return }
        let action = machine.stop()
        cacheTimeLine(now)
        switch action {
        case .stopped(let cancelling):
            if let cancelling { cancel(cancelling) }
            stopped(because: nil)
        case .none:
            break
        }
    }

    /// `Player.seek(toScheduleTime:)`.
    func seek(to target: Int64) {
        guard let now = begin() else { return }
        let action = machine.seek(to: target, now: now)
        cacheTimeLine(now)
        switch action {
        case .seeking(let seek, let progress):
            perform(seek)
            perform(progress, now: now)
        case .none:
            break
        }
    }

    /// A new `Player.playbackSpeed` (already clamped).
    func setSpeed(_ speed: Double) {
        guard let now = begin() else { return }
        let action = machine.setSpeed(speed, now: now)
        cacheTimeLine(now)
        switch action {
        case .progressed(let progress):
            perform(progress, now: now)
        case .none:
            break
        }
    }

    /// The player's timer fired.
    private func timerFired() {
        guard let now = begin() else { return }
        let action = machine.timerFired(now: now)
        cacheTimeLine(now)
        switch action {
        case .retry(let fetch, let progress):
            start(fetch)
            perform(progress, now: now)
        case .progressed(let progress):
            perform(progress, now: now)
        case .none:
            break
        }
    }

    /// Slice request `id` was answered.
    private func loaded(id: UInt64, _ slice: RecordingSlice) {
        guard let now = begin() else { return }
        let action = machine.loaded(id: id, slice, now: now)
        cacheTimeLine(now)
        switch action {
        case .loaded(let arrival, let progress):
            perform(arrival)
            perform(progress, now: now)
        case .stopped(let error):
            stopped(because: error)
        case .none:
            break
        }
    }

    /// Slice request `id` failed.
    private func failed(id: UInt64, _ error: PlayerError) {
        guard let now = begin() else { return }
        let action = machine.failed(id: id, error, now: now)
        cacheTimeLine(now)
        switch action {
        case .retrying(let progress):
            perform(progress, now: now)
        case .stopped(let error):
            stopped(because: error)
        case .none:
            break
        }
    }

    /// What every input does first: the current time, or nil once released.
    private func begin() -> Int64? {
        loop.preconditionInEventLoop()
        guard !released else { return nil }
        if shutdownHookID == nil {
            shutdownHookID = loop.addShutdownHook { [weak self] in self?.stop() }
        }
        model.globalStateCheck = player?.globalStateCheck
        return Player.now()
    }

    /// Puts the machine's clock and time line in the cache before any event
    /// of the input is raised, so a callback reads the new time.
    private func cacheTimeLine(_ now: Int64) {
        let clock = machine.clock
        var info = machine.timeInfo(at: now)
        if !machine.knowsTimeLine { info.beginTimestamp = configuration.from ?? 0 }
        player?.cache.withLock { cache in
            cache.clock = clock
            cache.info = info
        }
    }

    // MARK: Effects

    private func perform(_ seek: PlaybackMachine.Seek) {
        if let cancelling = seek.cancelling { cancel(cancelling) }
        if let phase = seek.phase { enter(phase) }
        start(seek.fetch)
    }

    private func perform(_ arrival: PlaybackMachine.Arrival) {
        if let snapshot = arrival.snapshot {
            // The first frame's state arrives silently: `loadFirstFrame` follows.
            let first = model.state == nil
            var outcome = model.reset(to: snapshot)
            if first { outcome.diff = PlayerStateDiff() }
            report(outcome)
        }
        if arrival.firstFrame { emit(.loadFirstFrame) }
        apply(arrival.frames)
        if let phase = arrival.phase { enter(phase) }
        if let time = arrival.scheduleTime { emit(.scheduleTimeChanged(time)) }
        if let fetch = arrival.fetch { start(fetch) }
    }

    private func perform(_ progress: PlaybackMachine.Progress, now: Int64) {
        apply(progress.frames)
        if let slice = progress.slice { emit(.sliceChanged(slice)) }
        if let phase = progress.phase { enter(phase) }
        if let time = progress.scheduleTime { emit(.scheduleTimeChanged(time)) }
        if let fetch = progress.prefetch { start(fetch) }
        switch progress.timer {
        case .arm(let at):
            arm(after: max(0, at - now))
        case .disarm:
            timer?.stop()
        }
    }

    private func apply(_ frames: [RecordedFrame]) {
        for frame in frames {
            report(model.apply(frame, room: configuration.room))
        }
    }

    /// Shows `phase` in the cache, then reports it.
    private func enter(_ phase: PlayerPhase) {
        player?.cache.withLock { $0.phase = phase }
        emit(.phaseChanged(phase))
    }

    /// The machine stopped (for `error`, when not asked to): report it,
    /// disarm the timer and release everything.
    private func stopped(because error: PlayerError?) {
        enter(.stopped)
        if let error {
            logger.warning("player stopped", metadata: ["room": "\(configuration.room)", "error": "\(error)"])
            emit(.stoppedWithError(error))
        }
        timer?.stop()
        release()
    }

    /// Drops the answer of request `id`, which is no longer wanted.
    private func cancel(_ id: UInt64) {
        if let inFlight, inFlight.id == id {
            self.inFlight = nil
            inFlight.request.cancel()
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
        broadcaster.yield(event) { .player(event) }
        player?.publish(event)
    }

    private func arm(after delay: Int64) {
        do {
            if timer == nil {
                timer = try LoopTimer(loop: loop) { [weak self] _ in self?.timerFired() }
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
                loop.execute { [weak self] in self?.failed(id: fetch.id, failure) }
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
                    loaded(id: fetch.id, slice)
                } catch {
                    failed(id: fetch.id, error)
                }
            case .failure(let error):
                failed(id: fetch.id, PlayerError(error))
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
