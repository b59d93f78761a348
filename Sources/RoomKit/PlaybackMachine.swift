import RoomKitProtocol

/// A player's time line as a value with no I/O: it takes an input and the
/// current real time (ms on a monotonic clock) and returns the actions the
/// driver must perform. Timing, speed, pause, seek, slices and buffering
/// live here and are unit-tested with an injected clock; the driver fetches
/// slices, applies frames and raises events.
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

    /// Takes `input` at real time `now` (ms, monotonic) and returns the
    /// actions to perform, in order. After `stop` (or a fatal error) every
    /// input returns no action.
    public mutating func handle(_ input: Input, now: Int64) -> [Action] {
        guard phase != .stopped else { return [] }
        var actions: [Action] = []
        switch input {
        case .play: play(now, &actions)
        case .pause: pause(now, &actions)
        case .stop:
            stopWith(nil, &actions)
            return actions
        case .seek(let target): seek(target, now, &actions)
        case .setSpeed(let speed):
            clock.setSpeed(min(Self.speeds.upperBound, max(Self.speeds.lowerBound, speed)), at: now)
        case .loaded(let id, let slice):
            guard fetching?.id == id, let request = fetching else { return [] }
            fetching = nil
            failures = 0
            load(slice, request, now, &actions)
        case .failed(let id, let error):
            guard fetching?.id == id, let request = fetching else { return [] }
            fetching = nil
            if error.isTransient && failures < settings.retries {
                failures += 1
                retryAt = now + settings.retryDelay
                fetching = request
            } else {
                stopWith(error, &actions)
                return actions
            }
        case .timer:
            if let at = retryAt, at <= now, let request = fetching {
                retryAt = nil
                actions.append(.fetch(request))
            }
        }
        advance(now, &actions)
        return actions
    }

    private mutating func play(_ now: Int64, _ actions: inout [Action]) {
        switch phase {
        case .waitingFirstFrame:
            wantsPlay = true
            startLoadingIfIdle(&actions)
        case .pause:
            wantsPlay = true
            resume(now, &actions)
        case .ended:
            wantsPlay = true
            seek(0, now, &actions)
        case .playing, .buffering, .stopped:
            break
        }
    }

    private mutating func pause(_ now: Int64, _ actions: inout [Action]) {
        switch phase {
        case .waitingFirstFrame:
            wantsPlay = false
            startLoadingIfIdle(&actions)
        case .playing, .buffering:
            wantsPlay = false
            clock.stop(at: now)
            setPhase(.pause, &actions)
            report(now, &actions, force: true)
        case .pause, .ended, .stopped:
            break
        }
    }

    private mutating func seek(_ target: Int64, _ now: Int64, _ actions: inout [Action]) {
        var target = max(0, target)
        if let info { target = min(target, info.duration) }
        if let request = fetching { actions.append(.cancelFetch(request.id)) }
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
        if phase != .waitingFirstFrame {
            setPhase(wantsPlay ? .buffering : .pause, &actions)
        }
        requestSlice(from: target, snapshot: true, &actions)
    }

    private mutating func startLoadingIfIdle(_ actions: inout [Action]) {
        guard fetching == nil, !stateLoaded else { return }
        requestSlice(from: Int64(clock.position), snapshot: true, &actions)
    }

    private mutating func requestSlice(from start: Int64, snapshot: Bool, _ actions: inout [Action]) {
        nextFetchID += 1
        let end = (start / settings.sliceLength + 1) * settings.sliceLength
        let request = Fetch(id: nextFetchID, start: start, end: end, snapshot: snapshot)
        fetching = request
        actions.append(.fetch(request))
    }

    private mutating func load(_ slice: RecordingSlice, _ request: Fetch, _ now: Int64, _ actions: inout [Action]) {
        info = (slice.beginTimestamp, slice.duration, slice.framesCount)
        if request.snapshot {
            guard let snapshot = slice.snapshot else {
                stopWith(PlayerError(kind: .malformedRecording, code: .malformed,
                                     message: "the recording slice at \(request.start) ms has no snapshot"), &actions)
                return
            }
            // A seek past the (then unknown) end lands on the end.
            clock.jump(to: Double(min(Int64(clock.position), slice.duration)), at: now)
            loadedEnd = slice.start
            actions.append(.reset(snapshot))
            stateLoaded = true
            if !firstFrameLoaded {
                firstFrameLoaded = true
                actions.append(.loadFirstFrame)
            }
        }
        let end = max(slice.end, slice.start)
        queue.append(contentsOf: slice.frames.filter { $0.t >= loadedEnd && $0.t < end })
        loadedEnd = max(loadedEnd, end)
        slices.append((slice.start, end))
        clock.limit = Double(isComplete ? slice.duration : loadedEnd)
        // The frames up to the landing time are applied before the phase and
        // time are reported, so a reader who sees scheduleTimeChanged(t) reads
        // the state at t (not the snapshot's, one action later).
        if stateLoaded { applyDueFrames(through: clock.time(at: now), &actions) }
        switch phase {
        case .waitingFirstFrame:
            if wantsPlay {
                resume(now, &actions)
            } else {
                setPhase(.pause, &actions)
            }
        case .buffering:
            resume(now, &actions)
        case .playing, .pause, .ended, .stopped:
            break
        }
        if request.snapshot { report(now, &actions, force: true) }
    }

    /// Plays from the current position when the data is there, else buffers.
    private mutating func resume(_ now: Int64, _ actions: inout [Action]) {
        let t = clock.position
        if stateLoaded && (Double(loadedEnd) > t || isComplete) {
            clock.start(at: now)
            setPhase(.playing, &actions)
            report(now, &actions, force: true)
        } else {
            setPhase(.buffering, &actions)
            if fetching == nil && retryAt == nil && !stateLoaded {
                requestSlice(from: Int64(t), snapshot: true, &actions)
            }
        }
    }

    private mutating func stopWith(_ error: PlayerError?, _ actions: inout [Action]) {
        if let request = fetching { actions.append(.cancelFetch(request.id)) }
        fetching = nil
        wantsPlay = false
        queue.removeAll()
        queueHead = 0
        setPhase(.stopped, &actions)
        if let error { actions.append(.stoppedWithError(error)) }
        actions.append(.cancelTimer)
        actions.append(.release)
    }

    private mutating func setPhase(_ next: PlayerPhase, _ actions: inout [Action]) {
        guard next != phase else { return }
        phase = next
        actions.append(.phase(next))
    }

    private mutating func report(_ now: Int64, _ actions: inout [Action], force: Bool) {
        let time = scheduleTime(at: now)
        if !force, let last = lastReport, now - last.at < settings.progressInterval { return }
        if lastReport?.time != time { actions.append(.scheduleTime(time)) }
        lastReport = (now, time)
    }

    /// Applies the queued frames at or before `t`, in order.
    private mutating func applyDueFrames(through t: Double, _ actions: inout [Action]) {
        var due: [RecordedFrame] = []
        while queueHead < queue.count, Double(queue[queueHead].t) <= t {
            due.append(queue[queueHead])
            queueHead += 1
        }
        if queueHead > 256 && queueHead * 2 > queue.count {
            queue.removeFirst(queueHead)
            queueHead = 0
        }
        if !due.isEmpty { actions.append(.apply(due)) }
    }

    // MARK: The clock's consequences

    /// Applies due frames, follows slices, enters buffering or ended,
    /// prefetches, reports progress, and arms the timer.
    private mutating func advance(_ now: Int64, _ actions: inout [Action]) {
        guard phase != .stopped else { return }
        guard stateLoaded, let info else {
            armTimer(now, &actions)
            return
        }
        let t = clock.time(at: now)
        applyDueFrames(through: t, &actions)
        followSlices(t, &actions)

        if clock.isRunning && t >= clock.limit {
            clock.stop(at: now)
            if isComplete && t >= Double(info.duration) {
                wantsPlay = false
                setPhase(.ended, &actions)
            } else {
                setPhase(.buffering, &actions)
            }
            report(now, &actions, force: true)
        } else if clock.isRunning {
            report(now, &actions, force: false)
        }

        if fetching == nil && retryAt == nil && !isComplete && Double(loadedEnd - settings.sliceLength) <= t {
            requestSlice(from: loadedEnd, snapshot: false, &actions)
        }
        armTimer(now, &actions)
    }

    private mutating func followSlices(_ t: Double, _ actions: inout [Action]) {
        while slices.count > 1, Double(slices[1].start) <= t {
            slices.removeFirst()
        }
        guard let slice = slices.first else { return }
        let name = "\(slice.start)-\(slice.end)"
        if name != currentSlice {
            currentSlice = name
            actions.append(.sliceChanged(name))
        }
    }

    private func armTimer(_ now: Int64, _ actions: inout [Action]) {
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
        if let at = candidates.min() {
            actions.append(.setTimer(max(now, at)))
        } else {
            actions.append(.cancelTimer)
        }
    }
}
