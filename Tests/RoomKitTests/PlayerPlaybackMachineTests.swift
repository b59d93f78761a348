import RoomKit
import RoomKitProtocol
import XCTest

/// The player's time line with an injected clock (ms): timing, speed,
/// pause, seek, slices, buffering, retries and the end.
final class PlayerPlaybackMachineTests: XCTestCase {
    private typealias Machine = PlaybackMachine

    private func machine() -> Machine {
        Machine(settings: .init(sliceLength: 1000, progressInterval: 250, retries: 2, retryDelay: 500))
    }

    /// A slice of a recording of `duration` ms that began at 1000.
    private func slice(_ start: Int64, _ end: Int64, duration: Int64 = 2500, frames: [Int64] = [],
                       snapshot: Bool = false) -> RecordingSlice {
        RecordingSlice(beginTimestamp: 1000, endTimestamp: 1000 + duration, framesCount: 9, start: start,
                       end: min(end, duration + 1), snapshot: snapshot ? RoomSnapshot(state: .initial) : nil,
                       frames: frames.enumerated().map { RecordedFrame(t: $1, seq: Int64($0 + 1), push: ["op": "magix"]) })
    }

    private func applied(_ actions: [Machine.Action]) -> [Int64] {
        actions.flatMap { action -> [Int64] in
            if case .apply(let frames) = action { return frames.map(\.t) }
            return []
        }
    }

    private func phases(_ actions: [Machine.Action]) -> [PlayerPhase] {
        actions.compactMap {
            if case .phase(let phase) = $0 { return phase }
            return nil
        }
    }

    private func fetches(_ actions: [Machine.Action]) -> [Machine.Fetch] {
        actions.compactMap {
            if case .fetch(let fetch) = $0 { return fetch }
            return nil
        }
    }

    private func timer(_ actions: [Machine.Action]) -> Int64? {
        actions.compactMap {
            if case .setTimer(let at) = $0 { return at }
            return nil
        }.last
    }

    /// Plays from 0 with slice 0 (frames at 0, 400, 900) loaded at real time `at`.
    private func playing(speed: Double = 1, at now: Int64 = 0) -> Machine {
        var m = machine()
        _ = m.handle(.setSpeed(speed), now: now)
        _ = m.handle(.play, now: now)
        _ = m.handle(.loaded(id: 1, slice(0, 1000, frames: [0, 400, 900], snapshot: true)), now: now)
        return m
    }

    func testPlayBeforeTheFirstFrame_fetchesSliceZeroWithSnapshot_thenPlays_andPrefetchesTheNextSlice() {
        var m = machine()
        XCTAssertEqual(m.phase, .waitingFirstFrame)
        XCTAssertEqual(m.timeInfo(at: 0), PlayerTimeInfo())
        let start = m.handle(.play, now: 0)
        XCTAssertEqual(start, [.fetch(.init(id: 1, start: 0, end: 1000, snapshot: true)), .cancelTimer])
        let loaded = m.handle(.loaded(id: 1, slice(0, 1000, frames: [0, 400, 900], snapshot: true)), now: 10)
        // The frames at the landing time are applied before phase and time
        // are reported: whoever sees scheduleTime(0) reads the state at 0.
        XCTAssertEqual(Array(loaded.prefix(5)), [
            .reset(RoomSnapshot(state: .initial)), .loadFirstFrame, .apply([
                RecordedFrame(t: 0, seq: 1, push: ["op": "magix"]),
            ]), .phase(.playing), .scheduleTime(0),
        ])
        XCTAssertTrue(loaded.contains(.sliceChanged("0-1000")))
        XCTAssertEqual(fetches(loaded), [.init(id: 2, start: 1000, end: 2000, snapshot: false)], "one slice ahead")
        XCTAssertEqual(m.timeInfo(at: 10), PlayerTimeInfo(scheduleTime: 0, timeDuration: 2500, framesCount: 9, beginTimestamp: 1000))
        XCTAssertEqual(timer(loaded), 260, "the first progress report comes before the frame at 400")
    }

    func testFrames_fireAtTheirRecordedTimeDividedBySpeed() {
        var m = playing(speed: 8)
        XCTAssertEqual(applied(m.handle(.timer, now: 49)), [], "400 / 8 = 50 ms")
        let first = m.handle(.timer, now: 50)
        XCTAssertEqual(applied(first), [400])
        XCTAssertEqual(timer(first), 113, "900 / 8 = 112.5, rounded up")
        XCTAssertEqual(applied(m.handle(.timer, now: 113)), [900])
        XCTAssertEqual(m.scheduleTime(at: 113), 904)
    }

    func testPause_freezesTheClock_andPlayResumesFromThere() {
        var m = playing()
        let paused = m.handle(.pause, now: 300)
        XCTAssertEqual(phases(paused), [.pause])
        XCTAssertTrue(paused.contains(.scheduleTime(300)))
        XCTAssertEqual(applied(m.handle(.timer, now: 5000)), [])
        XCTAssertEqual(m.scheduleTime(at: 5000), 300)
        let resumed = m.handle(.play, now: 5000)
        XCTAssertEqual(phases(resumed), [.playing])
        XCTAssertEqual(timer(resumed), 5100)
        XCTAssertEqual(applied(m.handle(.timer, now: 5100)), [400])
    }

    func testSpeed_isClampedFromHalfTo16_andAChangeKeepsThePosition() {
        var m = playing()
        _ = m.handle(.setSpeed(2), now: 200)
        XCTAssertEqual(m.scheduleTime(at: 300), 400)
        _ = m.handle(.setSpeed(100), now: 300)
        XCTAssertEqual(m.clock.speed, 16)
        _ = m.handle(.setSpeed(0.01), now: 300)
        XCTAssertEqual(m.clock.speed, 0.5)
        XCTAssertEqual(m.scheduleTime(at: 400), 450)
    }

    func testBuffering_whenTheClockReachesAnUnloadedSlice_thenPlayingWhenItArrives() {
        var m = playing()
        let starved = m.handle(.timer, now: 1000)
        XCTAssertEqual(applied(starved), [400, 900])
        XCTAssertEqual(phases(starved), [.buffering])
        XCTAssertTrue(starved.contains(.scheduleTime(1000)))
        XCTAssertEqual(m.scheduleTime(at: 1200), 1000, "the clock waits for the data")
        let arrived = m.handle(.loaded(id: 2, slice(1000, 2000, frames: [1000, 1500])), now: 1300)
        XCTAssertEqual(phases(arrived), [.playing])
        XCTAssertEqual(applied(arrived), [1000])
        XCTAssertTrue(arrived.contains(.sliceChanged("1000-2000")))
        XCTAssertEqual(fetches(arrived), [.init(id: 3, start: 2000, end: 3000, snapshot: false)])
        XCTAssertEqual(applied(m.handle(.timer, now: 1800)), [1500])
    }

    func testSeek_fetchesItsTargetWithSnapshot_ignoresStaleAnswers_andKeepsPlayingOrPaused() {
        var m = playing()
        _ = m.handle(.pause, now: 100)
        let seek = m.handle(.seek(1500), now: 100)
        XCTAssertEqual(Array(seek.prefix(2)), [.cancelFetch(2), .fetch(.init(id: 3, start: 1500, end: 2000, snapshot: true))])
        XCTAssertEqual(phases(seek), [], "a paused player stays paused")
        XCTAssertEqual(m.handle(.loaded(id: 2, slice(1000, 2000, frames: [1000])), now: 120), [], "stale answer")
        let landed = m.handle(.loaded(id: 3, slice(1500, 2000, frames: [1500, 1800], snapshot: true)), now: 150)
        XCTAssertEqual(landed.first, .reset(RoomSnapshot(state: .initial)))
        XCTAssertFalse(landed.contains(.loadFirstFrame), "fires once")
        XCTAssertTrue(landed.contains(.scheduleTime(1500)))
        XCTAssertEqual(applied(landed), [1500], "the frames at the target apply at once")
        XCTAssertEqual(m.scheduleTime(at: 900), 1500)

        let whilePlaying = m.handle(.play, now: 200) + m.handle(.seek(100), now: 200)
        XCTAssertEqual(phases(whilePlaying), [.playing, .buffering])
        let back = m.handle(.loaded(id: 5, slice(100, 1000, frames: [400], snapshot: true)), now: 220)
        XCTAssertEqual(phases(back), [.playing])
        XCTAssertEqual(applied(m.handle(.timer, now: 520)), [400])
        XCTAssertEqual(fetches(m.handle(.seek(99_999), now: 600)).map(\.start), [2500], "clamped to the recording")
    }

    func testEnd_stopsTheClockAtTheDuration_andPlayAgainStartsFromZero() {
        var m = machine()
        _ = m.handle(.play, now: 0)
        let loaded = m.handle(.loaded(id: 1, slice(0, 1000, duration: 800, frames: [0, 800], snapshot: true)), now: 0)
        XCTAssertEqual(fetches(loaded), [], "the whole recording is loaded")
        let end = m.handle(.timer, now: 800)
        XCTAssertEqual(applied(end), [800])
        XCTAssertEqual(phases(end), [.ended])
        XCTAssertTrue(end.contains(.scheduleTime(800)))
        XCTAssertEqual(m.scheduleTime(at: 2000), 800)
        let again = m.handle(.play, now: 2000)
        XCTAssertEqual(phases(again), [.buffering])
        XCTAssertEqual(fetches(again), [.init(id: 2, start: 0, end: 1000, snapshot: true)])
    }

    func testTransientFailure_isRetriedAfterTheDelay_thenStopsWithTheError() {
        var m = machine()
        _ = m.handle(.play, now: 0)
        let network = PlayerError(kind: .network, code: .connectionInterrupted, message: "refused")
        for attempt in 1...2 {
            let now = Int64(attempt) * 1000
            XCTAssertEqual(timer(m.handle(.failed(id: 1, network), now: now)), now + 500)
            XCTAssertEqual(fetches(m.handle(.timer, now: now + 500)), [.init(id: 1, start: 0, end: 1000, snapshot: true)])
        }
        let last = m.handle(.failed(id: 1, network), now: 5000)
        XCTAssertEqual(last, [.phase(.stopped), .stoppedWithError(network), .cancelTimer, .release])
    }

    func testTokenRefused_stopsAtOnce_andLaterInputsDoNothing() {
        var m = machine()
        _ = m.handle(.pause, now: 0)
        let refused = PlayerError(kind: .tokenInvalid, code: .tokenInvalid, message: "no", httpStatus: 401)
        XCTAssertEqual(m.handle(.failed(id: 1, refused), now: 5),
                       [.phase(.stopped), .stoppedWithError(refused), .cancelTimer, .release])
        XCTAssertEqual(m.handle(.play, now: 10), [])
        XCTAssertEqual(m.phase, .stopped)
    }

    func testStop_cancelsTheFetchAndReleases() {
        var m = machine()
        _ = m.handle(.play, now: 0)
        XCTAssertEqual(m.handle(.stop, now: 1), [.cancelFetch(1), .phase(.stopped), .cancelTimer, .release])
        XCTAssertEqual(m.handle(.loaded(id: 1, slice(0, 1000, snapshot: true)), now: 2), [])
    }

    func testRecordingSlice_parsesTheHeaderAndFrames_andKeepsABadLineAsAFrame() throws {
        let body = """
            {"room":"r","beginTimestamp":100,"endTimestamp":900,"framesCount":7,"sliceStart":200,"sliceEnd":400,\
            "sliceFramesCount":2,"snapshot":{"globalState":{"a":1},"sceneState":{"scenePath":"/init",\
            "scenes":[{"name":"init","ppt":null,"images":[]}],"index":0},"broadcastState":{"mode":"freedom",\
            "broadcasterId":null},"members":[],"streams":[],"extraInfo":{}}}
            {"op":"magix","room":"r","seq":4,"from":1,"event":"e","payload":null,"t":250}
            not json

            """
        let slice = try RecordingSlice(ndjson: Array(body.utf8))
        XCTAssertEqual([slice.beginTimestamp, slice.endTimestamp, slice.duration, slice.start, slice.end], [100, 900, 800, 200, 400])
        XCTAssertEqual(slice.framesCount, 7)
        XCTAssertEqual(slice.snapshot?.state.globalState, ["a": 1])
        XCTAssertEqual(slice.frames.map(\.t), [250, 250])
        XCTAssertEqual(slice.frames.map(\.seq), [4, 0])
        XCTAssertEqual(slice.frames.last?.push, .null)
        XCTAssertThrowsError(try RecordingSlice(ndjson: Array("{}\n".utf8))) {
            XCTAssertEqual(($0 as? PlayerError)?.kind, .malformedRecording)
        }
    }
}
