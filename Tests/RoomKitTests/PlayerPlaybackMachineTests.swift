import RoomKit
import RoomKitProtocol
import XCTest

/// The player's time line with an injected clock (ms): timing, speed,
/// pause, seek, slices, buffering, retries and the end; and what each input
/// leads to in each phase.
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

    private func frame(_ t: Int64, seq: Int64) -> RecordedFrame {
        RecordedFrame(t: t, seq: seq, push: ["op": "magix"])
    }

    /// Plays from 0 with slice 0 (frames at 0, 400, 900) loaded at real time `at`.
    private func playing(speed: Double = 1, at now: Int64 = 0) -> Machine {
        var m = machine()
        _ = m.setSpeed(speed, now: now)
        _ = m.play(now: now)
        _ = m.loaded(id: 1, slice(0, 1000, frames: [0, 400, 900], snapshot: true), now: now)
        return m
    }

    // MARK: Scenarios

    func testPlayBeforeTheFirstFrame_fetchesSliceZeroWithSnapshot_thenPlays_andPrefetchesTheNextSlice() {
        var m = machine()
        XCTAssertEqual(m.phase, .waitingFirstFrame)
        XCTAssertEqual(m.timeInfo(at: 0), PlayerTimeInfo())
        XCTAssertEqual(m.play(now: 0), .loading(.init(id: 1, start: 0, end: 1000, snapshot: true), .init(timer: .disarm)))
        let loaded = m.loaded(id: 1, slice(0, 1000, frames: [0, 400, 900], snapshot: true), now: 10)
        guard case .loaded(let arrival, let progress) = loaded else { return XCTFail("\(loaded)") }
        // The frames at the landing time come with the arrival, apart from
        // the clock's progress: the driver applies them before it reports
        // phase and time, so whoever sees scheduleTime(0) reads the state at 0.
        XCTAssertEqual(arrival, .init(snapshot: RoomSnapshot(state: .initial), firstFrame: true, frames: [frame(0, seq: 1)],
                                      phase: .playing, scheduleTime: 0))
        XCTAssertEqual(progress.slice, "0-1000")
        XCTAssertEqual(progress.prefetch, .init(id: 2, start: 1000, end: 2000, snapshot: false), "one slice ahead")
        XCTAssertEqual(m.timeInfo(at: 10), PlayerTimeInfo(scheduleTime: 0, timeDuration: 2500, framesCount: 9, beginTimestamp: 1000))
        XCTAssertEqual(progress.timer, .arm(at: 260), "the first progress report comes before the frame at 400")
        XCTAssertEqual(progress, .init(slice: "0-1000", prefetch: .init(id: 2, start: 1000, end: 2000, snapshot: false),
                                       timer: .arm(at: 260)), "nothing else")
    }

    func testFrames_fireAtTheirRecordedTimeDividedBySpeed() {
        var m = playing(speed: 8)
        XCTAssertEqual(m.timerFired(now: 49).progress?.times, [], "400 / 8 = 50 ms")
        let first = m.timerFired(now: 50).progress
        XCTAssertEqual(first?.times, [400])
        XCTAssertEqual(first?.timer, .arm(at: 113), "900 / 8 = 112.5, rounded up")
        XCTAssertEqual(m.timerFired(now: 113).progress?.times, [900])
        XCTAssertEqual(m.scheduleTime(at: 113), 904)
    }

    func testPause_freezesTheClock_andPlayResumesFromThere() {
        var m = playing()
        let paused = m.pause(now: 300)
        guard case .paused(let time, let afterPause) = paused else { return XCTFail("\(paused)") }
        XCTAssertEqual(time, 300)
        XCTAssertNil(afterPause.phase)
        XCTAssertEqual(m.timerFired(now: 5000).progress?.times, [])
        XCTAssertEqual(m.scheduleTime(at: 5000), 300)
        let resumed = m.play(now: 5000)
        guard case .playing(_, let afterPlay) = resumed else { return XCTFail("\(resumed)") }
        XCTAssertNil(afterPlay.phase)
        XCTAssertEqual(afterPlay.timer, .arm(at: 5100))
        XCTAssertEqual(m.timerFired(now: 5100).progress?.times, [400])
    }

    func testSpeed_isClampedFromHalfTo16_andAChangeKeepsThePosition() {
        var m = playing()
        _ = m.setSpeed(2, now: 200)
        XCTAssertEqual(m.scheduleTime(at: 300), 400)
        _ = m.setSpeed(100, now: 300)
        XCTAssertEqual(m.clock.speed, 16)
        _ = m.setSpeed(0.01, now: 300)
        XCTAssertEqual(m.clock.speed, 0.5)
        XCTAssertEqual(m.scheduleTime(at: 400), 450)
    }

    func testBuffering_whenTheClockReachesAnUnloadedSlice_thenPlayingWhenItArrives() {
        var m = playing()
        let starved = m.timerFired(now: 1000)
        guard case .progressed(let stall) = starved else { return XCTFail("\(starved)") }
        XCTAssertEqual(stall.times, [400, 900])
        XCTAssertEqual(stall.phase, .buffering)
        XCTAssertEqual(stall.scheduleTime, 1000)
        XCTAssertEqual(m.scheduleTime(at: 1200), 1000, "the clock waits for the data")
        let arrived = m.loaded(id: 2, slice(1000, 2000, frames: [1000, 1500]), now: 1300)
        guard case .loaded(let arrival, let progress) = arrived else { return XCTFail("\(arrived)") }
        XCTAssertEqual(arrival, .init(frames: [frame(1000, seq: 1)], phase: .playing))
        XCTAssertNil(progress.phase)
        XCTAssertEqual(progress.frames, [])
        XCTAssertEqual(progress.slice, "1000-2000")
        XCTAssertEqual(progress.prefetch, .init(id: 3, start: 2000, end: 3000, snapshot: false))
        XCTAssertEqual(m.timerFired(now: 1800).progress?.times, [1500])
    }

    func testSeek_fetchesItsTargetWithSnapshot_ignoresStaleAnswers_andKeepsPlayingOrPaused() {
        var m = playing()
        _ = m.pause(now: 100)
        let seek = m.seek(to: 1500, now: 100)
        guard case .seeking(let move, let afterSeek) = seek else { return XCTFail("\(seek)") }
        XCTAssertEqual(move, .init(cancelling: 2, phase: nil, fetch: .init(id: 3, start: 1500, end: 2000, snapshot: true)),
                       "a paused player stays paused")
        XCTAssertNil(afterSeek.phase)
        XCTAssertEqual(m.loaded(id: 2, slice(1000, 2000, frames: [1000]), now: 120), .none, "stale answer")
        let landed = m.loaded(id: 3, slice(1500, 2000, frames: [1500, 1800], snapshot: true), now: 150)
        guard case .loaded(let arrival, let progress) = landed else { return XCTFail("\(landed)") }
        XCTAssertEqual(arrival.snapshot, RoomSnapshot(state: .initial))
        XCTAssertFalse(arrival.firstFrame, "fires once")
        XCTAssertEqual(arrival.scheduleTime, 1500)
        XCTAssertEqual(arrival.frames.map(\.t), [1500], "the frames at the target apply at once")
        XCTAssertEqual(progress.frames, [])
        XCTAssertEqual(m.scheduleTime(at: 900), 1500)

        let play = m.play(now: 200)
        guard case .playing(_, let afterPlay) = play else { return XCTFail("\(play)") }
        XCTAssertNil(afterPlay.phase)
        let seekWhilePlaying = m.seek(to: 100, now: 200)
        guard case .seeking(let back, let afterBack) = seekWhilePlaying else { return XCTFail("\(seekWhilePlaying)") }
        XCTAssertEqual(back.phase, .buffering)
        XCTAssertNil(afterBack.phase)
        let landedBack = m.loaded(id: 5, slice(100, 1000, frames: [400], snapshot: true), now: 220)
        guard case .loaded(let backArrival, let backProgress) = landedBack else { return XCTFail("\(landedBack)") }
        XCTAssertEqual(backArrival.phase, .playing)
        XCTAssertNil(backProgress.phase)
        XCTAssertEqual(m.timerFired(now: 520).progress?.times, [400])
        let farSeek = m.seek(to: 99_999, now: 600)
        guard case .seeking(let far, let afterFar) = farSeek else { return XCTFail("\(farSeek)") }
        XCTAssertEqual(far.fetch.start, 2500, "clamped to the recording")
        XCTAssertNil(afterFar.prefetch)
    }

    func testEnd_stopsTheClockAtTheDuration_andPlayAgainStartsFromZero() {
        var m = machine()
        _ = m.play(now: 0)
        let loaded = m.loaded(id: 1, slice(0, 1000, duration: 800, frames: [0, 800], snapshot: true), now: 0)
        guard case .loaded(let arrival, let progress) = loaded else { return XCTFail("\(loaded)") }
        XCTAssertNil(arrival.fetch)
        XCTAssertNil(progress.prefetch, "the whole recording is loaded")
        let end = m.timerFired(now: 800)
        guard case .progressed(let atEnd) = end else { return XCTFail("\(end)") }
        XCTAssertEqual(atEnd.times, [800])
        XCTAssertEqual(atEnd.phase, .ended)
        XCTAssertEqual(atEnd.scheduleTime, 800)
        XCTAssertEqual(m.scheduleTime(at: 2000), 800)
        let again = m.play(now: 2000)
        guard case .restarted(let seek, let afterRestart) = again else { return XCTFail("\(again)") }
        XCTAssertEqual(seek, .init(phase: .buffering, fetch: .init(id: 2, start: 0, end: 1000, snapshot: true)))
        XCTAssertNil(afterRestart.phase)
        XCTAssertNil(afterRestart.prefetch)
    }

    func testTransientFailure_isRetriedAfterTheDelay_thenStopsWithTheError() {
        var m = machine()
        _ = m.play(now: 0)
        let network = PlayerError(kind: .network, code: .connectionInterrupted, message: "refused")
        for attempt in 1...2 {
            let now = Int64(attempt) * 1000
            XCTAssertEqual(m.failed(id: 1, network, now: now), .retrying(.init(timer: .arm(at: now + 500))))
            XCTAssertEqual(m.timerFired(now: now + 500),
                           .retry(.init(id: 1, start: 0, end: 1000, snapshot: true), .init(timer: .disarm)))
        }
        XCTAssertEqual(m.failed(id: 1, network, now: 5000), .stopped(network))
        XCTAssertEqual(m.phase, .stopped)
    }

    func testTokenRefused_stopsAtOnce_andLaterInputsDoNothing() {
        var m = machine()
        _ = m.pause(now: 0)
        let refused = PlayerError(kind: .tokenInvalid, code: .tokenInvalid, message: "no", httpStatus: 401)
        XCTAssertEqual(m.failed(id: 1, refused, now: 5), .stopped(refused))
        XCTAssertEqual(m.play(now: 10), .none)
        XCTAssertEqual(m.phase, .stopped)
    }

    func testStop_cancelsTheFetchAndReleases() {
        var m = machine()
        _ = m.play(now: 0)
        XCTAssertEqual(m.stop(), .stopped(cancelling: 1))
        XCTAssertEqual(m.loaded(id: 1, slice(0, 1000, snapshot: true), now: 2), .none)
    }

    // MARK: Each input's result in each phase

    private let network = PlayerError(kind: .network, code: .connectionInterrupted, message: "refused")

    func testBeforeTheFirstFrame_inputsOnlyLoadIt_andNoPhaseIsReported() {
        var m = machine()
        XCTAssertEqual(m.setSpeed(2, now: 0), .progressed(.init(timer: .disarm)))
        XCTAssertEqual(m.timerFired(now: 0), .progressed(.init(timer: .disarm)))
        XCTAssertEqual(m.pause(now: 0), .loading(.init(id: 1, start: 0, end: 1000, snapshot: true), .init(timer: .disarm)))
        XCTAssertEqual(m.play(now: 1), .loading(nil, .init(timer: .disarm)), "already loading")
        XCTAssertEqual(m.seek(to: 300, now: 2),
                       .seeking(.init(cancelling: 1, phase: nil, fetch: .init(id: 2, start: 300, end: 1000, snapshot: true)),
                                .init(timer: .disarm)))
        XCTAssertEqual(m.loaded(id: 1, slice(0, 1000, snapshot: true), now: 3), .none, "stale answer")
        XCTAssertEqual(m.failed(id: 1, network, now: 3), .none, "stale failure")
        XCTAssertEqual(m.phase, .waitingFirstFrame)
    }

    func testLoadedAfterPause_landsPaused_reportsTheTime_andPrefetchesWithoutATimer() {
        var m = machine()
        _ = m.pause(now: 0)
        XCTAssertEqual(m.loaded(id: 1, slice(0, 1000, frames: [0, 400], snapshot: true), now: 5),
                       .loaded(.init(snapshot: RoomSnapshot(state: .initial), firstFrame: true, frames: [frame(0, seq: 1)],
                                     phase: .pause, scheduleTime: 0),
                               .init(slice: "0-1000", prefetch: .init(id: 2, start: 1000, end: 2000, snapshot: false),
                                     timer: .disarm)))
        XCTAssertEqual(m.phase, .pause)
    }

    func testLoadedWithoutTheSnapshotItAskedFor_stopsAsMalformed() {
        var m = machine()
        _ = m.play(now: 0)
        XCTAssertEqual(m.loaded(id: 1, slice(0, 1000), now: 1),
                       .stopped(PlayerError(kind: .malformedRecording, code: .malformed,
                                            message: "the recording slice at 0 ms has no snapshot")))
        XCTAssertEqual(m.phase, .stopped)
    }

    func testWhilePlaying_playAndSpeedOnlyAdvance_andProgressIsReportedOncePerInterval() {
        var m = playing()
        XCTAssertEqual(m.play(now: 100), .progressed(.init(timer: .arm(at: 250))), "the next report is due at 250")
        XCTAssertEqual(m.play(now: 300), .progressed(.init(scheduleTime: 300, timer: .arm(at: 400))), "then the frame at 400")
        XCTAssertEqual(m.setSpeed(4, now: 350), .progressed(.init(timer: .arm(at: 363))), "(400 - 350) / 4, rounded up")
        XCTAssertEqual(m.phase, .playing)
    }

    func testPause_inEachPhase() {
        var m = playing()
        _ = m.timerFired(now: 1000)
        XCTAssertEqual(m.phase, .buffering)
        XCTAssertEqual(m.pause(now: 1100), .paused(scheduleTime: nil, .init(timer: .disarm)),
                       "paused where buffering stopped the clock: that time was reported already")
        XCTAssertEqual(m.pause(now: 1200), .progressed(.init(timer: .disarm)))

        var ended = machine()
        _ = ended.play(now: 0)
        _ = ended.loaded(id: 1, slice(0, 1000, duration: 800, snapshot: true), now: 0)
        _ = ended.timerFired(now: 800)
        XCTAssertEqual(ended.phase, .ended)
        XCTAssertEqual(ended.pause(now: 900), .progressed(.init(timer: .disarm)))
        XCTAssertEqual(ended.phase, .ended)
    }

    func testPlayOutOfAPauseWithoutTheData_buffers_andPlayWhileBufferingOnlyAdvances() {
        var m = playing()
        _ = m.timerFired(now: 1000)
        _ = m.pause(now: 1100)
        XCTAssertEqual(m.play(now: 1200), .buffering(nil, .init(timer: .disarm)), "slice 1000-2000 is still loading")
        XCTAssertEqual(m.phase, .buffering)
        XCTAssertEqual(m.play(now: 1300), .progressed(.init(timer: .disarm)))
    }

    func testATimerBeforeTheRetryIsDue_onlyRearms_andASeekDropsTheRetry() {
        var m = machine()
        _ = m.play(now: 0)
        XCTAssertEqual(m.failed(id: 1, network, now: 100), .retrying(.init(timer: .arm(at: 600))))
        XCTAssertEqual(m.timerFired(now: 599), .progressed(.init(timer: .arm(at: 600))))
        XCTAssertEqual(m.seek(to: 0, now: 599),
                       .seeking(.init(cancelling: 1, fetch: .init(id: 2, start: 0, end: 1000, snapshot: true)),
                                .init(timer: .disarm)))
        XCTAssertEqual(m.timerFired(now: 600), .progressed(.init(timer: .disarm)), "no retry left to send")
        XCTAssertEqual(m.failed(id: 1, network, now: 700), .none, "the abandoned request")
    }

    func testAfterStop_everyInputIsNone() {
        var m = playing()
        XCTAssertEqual(m.stop(), .stopped(cancelling: 2), "the prefetch of slice 1000-2000")
        XCTAssertEqual(m.stop(), .none)
        XCTAssertEqual(m.play(now: 1), .none)
        XCTAssertEqual(m.pause(now: 1), .none)
        XCTAssertEqual(m.seek(to: 0, now: 1), .none)
        XCTAssertEqual(m.setSpeed(2, now: 1), .none)
        XCTAssertEqual(m.timerFired(now: 1), .none)
        XCTAssertEqual(m.loaded(id: 2, slice(1000, 2000), now: 1), .none)
        XCTAssertEqual(m.failed(id: 2, network, now: 1), .none)
        XCTAssertEqual(m.phase, .stopped)
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

extension PlaybackMachine.Progress {
    /// The schedule times of the frames now due.
    fileprivate var times: [Int64] { frames.map(\.t) }
}

extension PlaybackMachine.TimerAction {
    /// What the clock did, when the timer found the machine running.
    fileprivate var progress: PlaybackMachine.Progress? {
        switch self {
        case .retry(_, let progress), .progressed(let progress): progress
        case .none: nil
        }
    }
}
