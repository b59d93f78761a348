import RoomKitProtocol

/// A player's time line as a value with no I/O: each input is a method that
/// takes the current real time (ms on a monotonic clock; all but `stop()`)
/// and returns what the input led to, as that input's own small result; the
/// driver performs the result's effects in an order it owns. Timing, speed, pause, seek, slices
/// and buffering live here and are unit-tested with an injected clock; the
/// driver fetches slices, applies frames and raises events.
///
/// Time line: frames have a schedule time `t` in `0...duration`; the state at
/// schedule time T is the snapshot plus every frame with `t <= T`. Slices
/// cover `[k·sliceLength, (k+1)·sliceLength)`; while playing, the machine
/// keeps the slice after the current one loaded (or loading), and enters
/// `buffering` when the clock reaches the end of what is loaded.
public struct PlaybackMachine: Sendable {
    /// Speeds the player accepts; others are clamped into this range.
    public static let speeds: ClosedRange<Double> = 0.5...16

    /// The tunables it was made with.
    public let settings: Settings
    /// The player's phase.
    public private(set) var phase: PlayerPhase = .waitingFirstFrame
    /// The playback clock (schedule time as a function of real time).
    public private(set) var clock = PlaybackClock()
    /// The recording's time line, known once the first slice has loaded.
    private var info: (beginTimestamp: Int64, duration: Int64, framesCount: Int)?
    private var wantsPlay = false
    private var firstFrameLoaded = false
    /// Whether a snapshot for the current position has been applied.
    private var stateLoaded = false
    private var queue: [RecordedFrame] = []
    private var queueHead = 0
    /// Frames with `t < loadedEnd` are applied or queued.
    private var loadedEnd: Int64 = 0
    /// Loaded slices not yet played past, for `sliceChanged`.
    private var slices: [(start: Int64, end: Int64)] = []
    private var currentSlice: String?
    private var fetching: Fetch?
    private var nextFetchID: UInt64 = 0
    private var failures = 0
    private var retryAt: Int64?
    private var lastReport: (at: Int64, time: Int64)?

    /// A machine in `waitingFirstFrame`, at schedule time 0, speed 1.
    public init(settings: Settings) {
        self.settings = settings
    }

    /// The schedule time at real time `now`, in whole ms.
    public func scheduleTime(at now: Int64) -> Int64 { Int64(clock.time(at: now)) }

    /// The time line at real time `now` (zeros until the first slice loaded).
    public func timeInfo(at now: Int64) -> PlayerTimeInfo {
        PlayerTimeInfo(scheduleTime: scheduleTime(at: now), timeDuration: info?.duration ?? 0,
                       framesCount: info?.framesCount ?? 0, beginTimestamp: info?.beginTimestamp ?? 0)
    }

    /// Whether the recording's time line is known (a slice has loaded).
    public var knowsTimeLine: Bool { info != nil }

    /// Whether every frame up to the end of the recording is loaded.
    private var isComplete: Bool {
        guard let info else { return false }
        return loadedEnd > info.duration
    }

    // MARK: Inputs

    // After `stop()` (or a fatal error) every input returns `.none`.

    /// `Player.play()`: plays from the current position (from 0 after the
    /// end); before the first frame, loads it and then plays.
    public mutating func play(now: Int64) -> PlayAction {
        switch phase {
        case .waitingFirstFrame:
            wantsPlay = true
            let fetch = startLoadingIfIdle()
            return .loading(fetch, advance(now))
        case .pause:
            wantsPlay = true
            switch resume(now) {
            case .playing(let time):
                return .playing(scheduleTime: time, advance(now))
            case .buffering(_, let fetch):
                // Always entered: the phase was `pause`.
                return .buffering(fetch, advance(now))
            }
        case .ended:
            wantsPlay = true
            let seek = jump(to: 0, now)
            return .restarted(seek, advance(now))
        case .playing, .buffering:
            return .progressed(advance(now))
        case .stopped:
            return .none
        }
    }

    /// `Player.pause()`: freezes the clock; before the first frame, loads it
    /// and stays paused.
    public mutating func pause(now: Int64) -> PauseAction {
        switch phase {
        case .waitingFirstFrame:
            wantsPlay = false
            let fetch = startLoadingIfIdle()
            return .loading(fetch, advance(now))
        case .playing, .buffering:
            wantsPlay = false
            clock.stop(at: now)
            phase = .pause
            let time = report(now, force: true)
            return .paused(scheduleTime: time, advance(now))
        case .pause, .ended:
            return .progressed(advance(now))
        case .stopped:
            return .none
        }
    }

    /// `Player.stop()`: stops for good. Takes no time: nothing it asks for
    /// depends on the clock.
    public mutating func stop() -> StopAction {
        switch phase {
        case .waitingFirstFrame, .playing, .buffering, .pause, .ended:
            let cancelling = fetching?.id
            halt()
            return .stopped(cancelling: cancelling)
        case .stopped:
            return .none
        }
    }

    /// `Player.seek(toScheduleTime:)`: moves to `target` ms after
    /// `beginTimestamp`, clamped to the recording once its duration is known.
    public mutating func seek(to target: Int64, now: Int64) -> SeekAction {
        switch phase {
        case .waitingFirstFrame, .playing, .buffering, .pause, .ended:
            let seek = jump(to: target, now)
            return .seeking(seek, advance(now))
        case .stopped:
            return .none
        }
    }

    /// A new `playbackSpeed`, clamped to `speeds`; the position is kept.
    public mutating func setSpeed(_ speed: Double, now: Int64) -> SpeedAction {
        switch phase {
        case .waitingFirstFrame, .playing, .buffering, .pause, .ended:
            clock.setSpeed(min(Self.speeds.upperBound, max(Self.speeds.lowerBound, speed)), at: now)
            return .progressed(advance(now))
        case .stopped:
            return .none
        }
    }

    /// Fetch `id` was answered with `slice`.
    public mutating func loaded(id: UInt64, _ slice: RecordingSlice, now: Int64) -> LoadedAction {
        switch phase {
        case .waitingFirstFrame, .playing, .buffering, .pause, .ended:
            guard let request = fetching, request.id == id else { return .none }
            fetching = nil
            failures = 0
            return load(slice, request, now)
        case .stopped:
            return .none
        }
    }

    /// Fetch `id` failed: a transient failure is retried after
    /// `settings.retryDelay` while retries are left; anything else stops.
    public mutating func failed(id: UInt64, _ error: PlayerError, now: Int64) -> FailedAction {
        switch phase {
        case .waitingFirstFrame, .playing, .buffering, .pause, .ended:
            guard let request = fetching, request.id == id else { return .none }
            if error.isTransient && failures < settings.retries {
                // The request stays current: its retry keeps the same id.
                failures += 1
                retryAt = now + settings.retryDelay
                return .retrying(advance(now))
            }
            fetching = nil
            halt()
            return .stopped(error)
        case .stopped:
            return .none
        }
    }

    /// The timer armed by the last `Progress` fired.
    public mutating func timerFired(now: Int64) -> TimerAction {
        switch phase {
        case .waitingFirstFrame, .playing, .buffering, .pause, .ended:
            if let at = retryAt, at <= now, let request = fetching {
                retryAt = nil
                return .retry(request, advance(now))
            }
            return .progressed(advance(now))
        case .stopped:
            return .none
        }
    }

    // MARK: Steps

    /// Moves the position to `target` and requests the state there.
    private mutating func jump(to target: Int64, _ now: Int64) -> Seek {
        var target = max(0, target)
        if let info { target = min(target, info.duration) }
        let cancelling = fetching?.id
        fetching = nil
        retryAt = nil
        failures = 0
        queue.removeAll()
        queueHead = 0
        slices.removeAll()
        currentSlice = nil
        stateLoaded = false
        loadedEnd = target
        clock.stop(at: now)
        clock.jump(to: Double(target), at: now)
        clock.limit = Double(target)
        lastReport = nil
        var entered: PlayerPhase?
        if phase != .waitingFirstFrame {
            entered = enter(wantsPlay ? .buffering : .pause)
        }
        return Seek(cancelling: cancelling, phase: entered, fetch: requestSlice(from: target, snapshot: true))
    }

    private mutating func startLoadingIfIdle() -> Fetch? {
        guard fetching == nil, !stateLoaded else { return nil }
        return requestSlice(from: Int64(clock.position), snapshot: true)
    }

    private mutating func requestSlice(from start: Int64, snapshot: Bool) -> Fetch {
        nextFetchID += 1
        let end = (start / settings.sliceLength + 1) * settings.sliceLength
        let request = Fetch(id: nextFetchID, start: start, end: end, snapshot: snapshot)
        fetching = request
        return request
    }

    private mutating func load(_ slice: RecordingSlice, _ request: Fetch, _ now: Int64) -> LoadedAction {
        info = (slice.beginTimestamp, slice.duration, slice.framesCount)
        var arrival = Arrival()
        if request.snapshot {
            guard let snapshot = slice.snapshot else {
                halt()
                return .stopped(PlayerError(kind: .malformedRecording, code: .malformed,
                                            message: "the recording slice at \(request.start) ms has no snapshot"))
            }
            // A seek past the (then unknown) end lands on the end.
            clock.jump(to: Double(min(Int64(clock.position), slice.duration)), at: now)
            loadedEnd = slice.start
            arrival.snapshot = snapshot
            stateLoaded = true
            if !firstFrameLoaded {
                firstFrameLoaded = true
                arrival.firstFrame = true
            }
        }
        let end = max(slice.end, slice.start)
        queue.append(contentsOf: slice.frames.filter { $0.t >= loadedEnd && $0.t < end })
        loadedEnd = max(loadedEnd, end)
        slices.append((slice.start, end))
        clock.limit = Double(isComplete ? slice.duration : loadedEnd)
        // The frames up to the landing time are part of the arrival (not of
        // the clock's progress), so the driver can apply them before it
        // reports the phase and time.
        if stateLoaded { arrival.frames = dueFrames(through: clock.time(at: now)) }
        switch phase {
        case .waitingFirstFrame:
            if wantsPlay {
                arrival.take(resume(now))
            } else {
                arrival.phase = enter(.pause)
            }
        case .buffering:
            arrival.take(resume(now))
        case .playing, .pause, .ended, .stopped:
            break
        }
        // A resume that played has reported this time already (same `now`),
        // so at most one of the two reports has a time.
        if request.snapshot, let time = report(now, force: true) { arrival.scheduleTime = time }
        return .loaded(arrival, advance(now))
    }

    /// Where `resume` led.
    fileprivate enum Resumed {
        /// Now `playing`, with the time to report.
        case playing(scheduleTime: Int64?)
        /// `buffering` (`entered`: it was not before), with a snapshot request
        /// when nothing is loading the position.
        case buffering(entered: Bool, Fetch?)
    }

    /// Plays from the current position when the data is there, else buffers.
    private mutating func resume(_ now: Int64) -> Resumed {
        let t = clock.position
        if stateLoaded && (Double(loadedEnd) > t || isComplete) {
            clock.start(at: now)
            phase = .playing
            return .playing(scheduleTime: report(now, force: true))
        }
        let entered = enter(.buffering) != nil
        if fetching == nil && retryAt == nil && !stateLoaded {
            return .buffering(entered: entered, requestSlice(from: Int64(t), snapshot: true))
        }
        return .buffering(entered: entered, nil)
    }

    /// Stops for good: nothing loads or plays any more.
    private mutating func halt() {
        fetching = nil
        wantsPlay = false
        queue.removeAll()
        queueHead = 0
        phase = .stopped
    }

    /// Moves to `next`; returns it when it is a change, nil when not.
    private mutating func enter(_ next: PlayerPhase) -> PlayerPhase? {
        guard next != phase else { return nil }
        phase = next
        return next
    }

    /// The schedule time to report at `now`, if any: forced ones always
    /// (unless the time is the one last reported), others once per
    /// `progressInterval`.
    private mutating func report(_ now: Int64, force: Bool) -> Int64? {
        let time = scheduleTime(at: now)
        if !force, let last = lastReport, now - last.at < settings.progressInterval { return nil }
        let changed = lastReport?.time != time
        lastReport = (now, time)
        return changed ? time : nil
    }

    /// Takes the queued frames at or before `t`, in order.
    private mutating func dueFrames(through t: Double) -> [RecordedFrame] {
        var due: [RecordedFrame] = []
        while queueHead < queue.count, Double(queue[queueHead].t) <= t {
            due.append(queue[queueHead])
            queueHead += 1
        }
        if queueHead > 256 && queueHead * 2 > queue.count {
            queue.removeFirst(queueHead)
            queueHead = 0
        }
        return due
    }

    // MARK: The clock's consequences

    /// Takes due frames, follows slices, enters buffering or ended, prefetches,
    /// reports progress, and arms the timer. Never called once stopped: the
    /// inputs return before.
    private mutating func advance(_ now: Int64) -> Progress {
        guard stateLoaded, let info else { return Progress(timer: timer(now)) }
        var progress = Progress(timer: .disarm)
        let t = clock.time(at: now)
        progress.frames = dueFrames(through: t)
        progress.slice = followSlices(t)

        if clock.isRunning && t >= clock.limit {
            clock.stop(at: now)
            if isComplete && t >= Double(info.duration) {
                wantsPlay = false
                progress.phase = enter(.ended)
            } else {
                progress.phase = enter(.buffering)
            }
            progress.scheduleTime = report(now, force: true)
        } else if clock.isRunning {
            progress.scheduleTime = report(now, force: false)
        }

        if fetching == nil && retryAt == nil && !isComplete && Double(loadedEnd - settings.sliceLength) <= t {
            progress.prefetch = requestSlice(from: loadedEnd, snapshot: false)
        }
        progress.timer = timer(now)
        return progress
    }

    /// The slice playback is in, when it is a change.
    private mutating func followSlices(_ t: Double) -> String? {
        while slices.count > 1, Double(slices[1].start) <= t {
            slices.removeFirst()
        }
        guard let slice = slices.first else { return nil }
        let name = "\(slice.start)-\(slice.end)"
        guard name != currentSlice else { return nil }
        currentSlice = name
        return name
    }

    /// The timer for the next thing due: a retry, a frame, the end of the
    /// loaded data, the next slice, a prefetch or a progress report.
    private func timer(_ now: Int64) -> TimerChange {
        var candidates: [Int64] = []
        if let retryAt { candidates.append(retryAt) }
        if clock.isRunning {
            if queueHead < queue.count, let at = clock.realTime(reaching: Double(queue[queueHead].t)) {
                candidates.append(at)
            }
            if let at = clock.realTime(reaching: clock.limit) { candidates.append(at) }
            if slices.count > 1, let at = clock.realTime(reaching: Double(slices[1].start)) { candidates.append(at) }
            if fetching == nil && !isComplete,
               let at = clock.realTime(reaching: Double(loadedEnd - settings.sliceLength)) {
                candidates.append(at)
            }
            candidates.append((lastReport?.at ?? now) + settings.progressInterval)
        }
        guard let at = candidates.min() else { return .disarm }
        return .arm(at: max(now, at))
    }
}

extension PlaybackMachine.Arrival {
    /// Takes in where a resume led.
    fileprivate mutating func take(_ resumed: PlaybackMachine.Resumed) {
        switch resumed {
        case .playing(let time):
            phase = .playing
            scheduleTime = time
        case .buffering(let entered, let request):
            if entered { phase = .buffering }
            fetch = request
        }
    }
}
