import CoreMetrics
import Foundation
import RoomKitLoop
import RoomKitProtocol
import Synchronization

/// The bot's own recent history for the dashboard's Activity charts
/// (`GET /v1/bot/activity`, docs/DASHBOARD.md): a fixed ring of samples,
/// one per `interval` (2 s) for the last `capacity` (300: 10 minutes), each
/// with the events/s and the dispatch latency's p50 and p99 over that
/// interval. A freshly opened page draws the last minutes at once.
///
/// The latency comes from the bucket deltas of `roomkit_event_dispatch_seconds`
/// (push received → last plugin done, one sample per room event that reached
/// a plugin; PluginTurnDone.swift): `DispatchTap` sees every sample the histogram gets, with the same
/// buckets, and the sampler subtracts the previous interval's cumulative
/// counts, so a sample is that interval's distribution, not a mean since start.
///
/// Memory is fixed: the ring, and one count per bucket.
final class BotActivity: Sendable {
    /// One interval.
    struct Sample: Sendable, Equatable {
        /// When the interval ended (ms since epoch).
        var ts: Int64
        var eventsPerSecond: Double
        /// Dispatch samples in the interval, and their p50 and p99 (ms; nil with none).
        var dispatchCount: Int
        var p50Ms: Double?
        var p99Ms: Double?
    }

    /// The sampler's state, on the loop thread only (checked: `LoopBound`).
    struct Sampler {
        var ring: [Sample] = []
        /// Where the next sample goes once the ring is full.
        var next = 0
        var lastEvents = 0
        var lastBuckets: [Int] = []
        var lastAt = DispatchTime.now().uptimeNanoseconds
        var timer: LoopTimer?
    }

    let interval: Duration
    let capacity: Int
    /// Events raised (any thread: the loop's observer adds, the sampler reads).
    private let events = Atomic<Int>(0)
    /// The dispatch histogram's cumulative bucket counts.
    let dispatch: DispatchTap
    /// Set by `start(loop:)`; nil before.
    private let sampler = LockedValue<LoopBound<Sampler>?>(nil)

    init(bounds: [Duration], interval: Duration = .seconds(2), capacity: Int = 300) {
        self.interval = interval
        self.capacity = capacity
        dispatch = DispatchTap(bounds: bounds)
    }

    /// One event raised. Any thread.
    func countEvent() {
        events.add(1, ordering: .relaxed)
    }

    /// Starts sampling every `interval`. Loop thread only.
    func start(loop: EventLoop) throws {
        let state = LoopBound(Sampler(lastBuckets: dispatch.counts()), loop: loop)
        sampler.withLock { $0 = state }
        let timer = try loop.scheduleTimer(after: interval, repeating: interval) { [weak self] _ in self?.sample() }
        state.value.timer = timer
    }

    /// Stops sampling (the ring stays readable). Loop thread only.
    func stop() {
        guard let state = sampler.withLock({ $0 }) else { return }
        state.value.timer?.cancel()
        state.value.timer = nil
    }

    /// Takes one sample now. Loop thread only (the timer; tests).
    func sample() {
        guard let state = sampler.withLock({ $0 }) else { return }
        let total = events.load(ordering: .relaxed)
        let buckets = dispatch.counts()
        let now = DispatchTime.now().uptimeNanoseconds
        state.withValue { s in
            let seconds = max(Double(now &- s.lastAt) / 1e9, 1e-3)
            let deltas = zip(buckets, s.lastBuckets).map { max(0, $0 - $1) }
            let sample = Sample(ts: Int64(Date().timeIntervalSince1970 * 1000),
                                eventsPerSecond: Double(max(0, total - s.lastEvents)) / seconds,
                                dispatchCount: deltas.reduce(0, +),
                                p50Ms: dispatch.quantile(0.5, of: deltas).map { $0 * 1000 },
                                p99Ms: dispatch.quantile(0.99, of: deltas).map { $0 * 1000 })
            if s.ring.count < capacity {
                s.ring.append(sample)
            } else {
                s.ring[s.next] = sample
            }
            s.next = (s.next + 1) % capacity
            s.lastEvents = total
            s.lastBuckets = buckets
            s.lastAt = now
        }
    }

    /// The samples, oldest first, those after `since` (ms) only when given. Loop thread only.
    func samples(since: Int64? = nil) -> [Sample] {
        guard let state = sampler.withLock({ $0 }) else { return [] }
        return state.withValue { s in
            let ordered = s.ring.count < capacity ? s.ring : Array(s.ring[s.next...] + s.ring[..<s.next])
            guard let since else { return ordered }
            return ordered.filter { $0.ts > since }
        }
    }

    /// `GET /v1/bot/activity`'s answer. Loop thread only.
    func json(since: Int64?) -> JSON {
        [
            "intervalMs": .int(interval.milliseconds), "capacity": .int(Int64(capacity)),
            "samples": .array(samples(since: since).map { sample in
                ["ts": .int(sample.ts), "eventsPerSecond": .double(sample.eventsPerSecond),
                 "dispatchCount": .int(Int64(sample.dispatchCount)),
                 "dispatchP50Ms": sample.p50Ms.map(JSON.double) ?? .null, "dispatchP99Ms": sample.p99Ms.map(JSON.double) ?? .null]
            }),
        ]
    }
}

/// Cumulative bucket counts of a duration histogram, fed beside the
/// Prometheus histogram with its bucket bounds (`le`); the last count is
/// `+Inf`. Thread-safe (plugin threads record).
final class DispatchTap: Sendable {
    /// Upper bounds in seconds, ascending.
    let bounds: [Double]
    private let buckets: LockedValue<[Int]>

    init(bounds: [Duration]) {
        self.bounds = bounds.map { Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18 }
        buckets = LockedValue(Array(repeating: 0, count: bounds.count + 1))
    }

    func record(nanoseconds: Int64) {
        let seconds = Double(nanoseconds) / 1e9
        // The first bucket whose bound holds it (Prometheus' `le`), else +Inf.
        let index = bounds.firstIndex { seconds <= $0 } ?? bounds.count
        buckets.withLock { $0[index] += 1 }
    }

    /// Per-bucket counts (not cumulative), `+Inf` last.
    func counts() -> [Int] { buckets.withLock { $0 } }

    /// The `q` quantile (seconds) of per-bucket `counts`, as Prometheus'
    /// `histogram_quantile` estimates it: linear within the bucket it falls
    /// in; in `+Inf`, the highest finite bound. nil with no samples.
    func quantile(_ q: Double, of counts: [Int]) -> Double? {
        let total = counts.reduce(0, +)
        guard total > 0 else { return nil }
        let rank = q * Double(total)
        var below = 0
        for (index, count) in counts.enumerated() {
            if count > 0, Double(below + count) >= rank {
                guard index < bounds.count else { return bounds.last }
                let lower = index == 0 ? 0 : bounds[index - 1]
                return lower + (bounds[index] - lower) * (rank - Double(below)) / Double(count)
            }
            below += count
        }
        return bounds.last
    }
}

/// A swift-metrics factory that is `base`, except that the timer labelled
/// `tapped` also feeds `tap` (the Activity charts' histogram).
struct DispatchTapFactory: MetricsFactory {
    let base: any MetricsFactory
    let tapped: String
    let tap: DispatchTap

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        base.makeCounter(label: label, dimensions: dimensions)
    }
    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        base.makeFloatingPointCounter(label: label, dimensions: dimensions)
    }
    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        base.makeRecorder(label: label, dimensions: dimensions, aggregate: aggregate)
    }
    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        base.makeMeter(label: label, dimensions: dimensions)
    }
    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        let handler = base.makeTimer(label: label, dimensions: dimensions)
        return label == tapped ? TappedTimer(base: handler, tap: tap) : handler
    }
    func destroyCounter(_ handler: any CounterHandler) { base.destroyCounter(handler) }
    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) { base.destroyFloatingPointCounter(handler) }
    func destroyRecorder(_ handler: any RecorderHandler) { base.destroyRecorder(handler) }
    func destroyMeter(_ handler: any MeterHandler) { base.destroyMeter(handler) }
    func destroyTimer(_ handler: any TimerHandler) {
        base.destroyTimer((handler as? TappedTimer)?.base ?? handler)
    }
}

/// A timer that records into its Prometheus histogram and the tap.
final class TappedTimer: TimerHandler, Sendable {
    let base: any TimerHandler
    let tap: DispatchTap

    init(base: any TimerHandler, tap: DispatchTap) {
        self.base = base
        self.tap = tap
    }

    func recordNanoseconds(_ duration: Int64) {
        base.recordNanoseconds(duration)
        tap.record(nanoseconds: duration)
    }
}
