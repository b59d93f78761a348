import Foundation
import RoomKit
import RoomKitLoop
import RoomKitProtocol
import RoomKitServer
import XCTest

/// The player against a real in-process roomd over real sockets: a session
/// recorded through raw protocol clients, replayed, sought, slowed, broken.
final class PlayerTests: XCTestCase {
    private var harness: PlayerHarness!

    override func tearDown() async throws {
        try await harness?.close()
        harness = nil
    }

    func testReplayAt8x_hasTheFramesCount_theEventOrder_scaledTiming_andPhasesWaitingPlayingEnded() async throws {
        harness = try PlayerHarness()
        let (from, to) = try await Lesson.record(harness, room: "lesson")
        let player = try Player(loop: harness.clientLoop, configuration: harness.playerConfiguration("lesson", from: from, to: to))
        let recorder = PlayerRecorder(player)
        player.playbackSpeed = 8
        let started = Int64(DispatchTime.now().uptimeNanoseconds / 1_000_000)
        player.play()
        await waitFor("the end") { player.phase == .ended }

        XCTAssertEqual(player.timeInfo.framesCount, 12)
        XCTAssertEqual(player.timeInfo.beginTimestamp, from)
        XCTAssertEqual(player.timeInfo.timeDuration, to - from)
        XCTAssertEqual(player.timeInfo.scheduleTime, to - from, "ended at the end")
        XCTAssertEqual(recorder.phases, [.waitingFirstFrame, .playing, .ended])
        XCTAssertEqual(recorder.frameEvents.map(\.what), Lesson.frameEvents, "one event per frame, in recorded order")
        XCTAssertEqual(recorder.events.filter { $0 == .loadFirstFrame }.count, 1)
        // 800 ms slices over [0, to - from + 1): two for the lesson as it is
        // recorded here, more when a slow (sanitized) run stretched it.
        XCTAssertEqual(recorder.slices.count, Int((to - from + 1 + 799) / 800), "800 ms slices: \(recorder.slices)")
        XCTAssertTrue(recorder.slices.first?.hasPrefix("0-800") ?? false, "\(recorder.slices)")
        XCTAssertEqual(player.globalState, ["topic": "decimals", "step": 2])
        XCTAssertEqual(player.members?.map(\.userId), ["u1"])

        // Timing: each frame fires at its recorded offset / 8, within tolerance.
        let recording = try await fetchRecording("lesson", from: from, to: to)
        let offsets = recording.frames.map(\.t)
        let fired = recorder.frameEvents.map(\.at)
        XCTAssertEqual(offsets.count, fired.count)
        let base = try XCTUnwrap(fired.first) - offsets[0] / 8
        for (t, at) in zip(offsets, fired) {
            XCTAssertEqual(Double(at - base), Double(t) / 8, accuracy: 60, "frame at \(t) ms fired at \(at - base) ms")
        }
        let elapsed = Double(try XCTUnwrap(fired.last) - started)
        XCTAssertGreaterThan(elapsed, Double(offsets.last!) / 8 - 60, "not faster than 8x")
        // The first frame waits for the first slice: 400 ms of slack, 2 s in a sanitizer build.
        let slack: Double = ProcessInfo.processInfo.environment["ROOMKIT_SANITIZED"] != nil ? 2_000 : 400
        XCTAssertLessThan(elapsed, Double(offsets.last!) / 8 + slack, "not slower than 8x")
        // scheduleTimeChanged reports move forward.
        let times = recorder.events.compactMap { event -> Int64? in
            if case .scheduleTimeChanged(let time) = event { return time }
            return nil
        }
        XCTAssertEqual(times, times.sorted())
        XCTAssertEqual(times.last, to - from)
    }

    func testSeekToTheMiddle_stateEqualsTheLiveStateCapturedAtThatSeq_withoutReplayingFromTheStart() async throws {
        harness = try PlayerHarness { $0.snapshotEvery = 3 }
        // A watcher member captures the live state after every event it sees.
        let live = LiveCapture()
        let host = try harness.host()
        host.addObserver { [weak host] _ in
            guard let room = host?.room("lesson") else { return }
            live.record(room.content)
        }
        try await host.loginRoom("lesson", user: LoginUser(id: "watcher"), token: harness.token("watcher", role: .reader),
                                 writable: false)
        let (from, to) = try await Lesson.record(harness, room: "lesson")
        let recording = try await fetchRecording("lesson", from: from, to: to)
        XCTAssertEqual(recording.frames.count, 12)

        let player = try Player(loop: harness.clientLoop, configuration: harness.playerConfiguration("lesson", from: from, to: to))
        let recorder = PlayerRecorder(player)
        for index in [7, 2, 9] {
            let frame = recording.frames[index]
            XCTAssertLessThan(frame.t, recording.frames[index + 1].t, "the next frame is later")
            let expected = try XCTUnwrap(live.content(atSeq: frame.seq), "live state at seq \(frame.seq)")
            let before = recorder.events.count
            player.seek(toScheduleTime: frame.t)
            await waitFor("the seek to \(frame.t) to land") {
                recorder.events.dropFirst(before).contains(.scheduleTimeChanged(frame.t)) && player.phase == .pause
            }
            let state = try XCTUnwrap(player.state)
            XCTAssertEqual(state.roomState, expected.state, "state at seq \(frame.seq)")
            XCTAssertEqual(state.members, expected.members, "members at seq \(frame.seq)")
            XCTAssertEqual(state.streams, expected.streams)
            XCTAssertEqual(state.extraInfo, expected.extraInfo)
            XCTAssertEqual(player.scheduleTime, frame.t)
            let async = try await player.getPlayerState()
            XCTAssertEqual(async, state, "the async getter agrees")
            // The seek loaded from its target, not from the start.
            let slice = recorder.events.dropFirst(before).compactMap { event -> String? in
                if case .sliceChanged(let name) = event { return name }
                return nil
            }.first
            XCTAssertEqual(slice, "\(frame.t)-\(min((frame.t / 800 + 1) * 800, to - from + 1))")
        }
        XCTAssertEqual(recorder.phases.prefix(2), [.waitingFirstFrame, .pause], "a seek alone loads and stays paused")
        XCTAssertEqual(recorder.events.filter { $0 == .loadFirstFrame }.count, 1)

        // Seeking while playing goes on playing from the target.
        player.play()
        player.seek(toScheduleTime: recording.frames[10].t)
        await waitFor("the end") { player.phase == .ended }
        XCTAssertEqual(player.globalState, ["topic": "decimals", "step": 2])
    }

    func testSlowServer_yieldsBufferingAndThenPlaying_andStillPlaysEveryFrame() async throws {
        harness = try PlayerHarness { $0.recordingDelay = .milliseconds(150) }
        let (from, to) = try await Lesson.record(harness, room: "slow", steps: 6)
        var configuration = harness.playerConfiguration("slow", from: from, to: to)
        configuration.sliceDuration = .milliseconds(200)
        let player = try Player(loop: harness.clientLoop, configuration: configuration)
        let recorder = PlayerRecorder(player)
        player.playbackSpeed = 8
        player.play()
        // The cache shows a phase before observers hear of it: wait for both.
        await waitFor("the end") { player.phase == .ended && recorder.phases.last == .ended }
        let phases = recorder.phases
        XCTAssertEqual(phases.prefix(2), [.waitingFirstFrame, .playing])
        XCTAssertEqual(phases.last, .ended)
        let buffering = try XCTUnwrap(phases.firstIndex(of: .buffering), "\(phases)")
        XCTAssertEqual(phases[buffering + 1], .playing, "buffering ends in playing")
        XCTAssertEqual(recorder.frameEvents.map(\.what), Array(Lesson.frameEvents.prefix(6)))
    }

    func testBadToken_stopsWithTokenInvalid() async throws {
        harness = try PlayerHarness()
        _ = try await harness.member("u1", room: "r1")
        let token = harness.token("viewer", room: "r1", secret: "not-the-secret")
        let player = try Player(loop: harness.clientLoop, configuration: harness.playerConfiguration("r1", token: token))
        let recorder = PlayerRecorder(player)
        player.play()
        // The cache shows `stopped` before the event is delivered: wait for both.
        await waitFor("the stop") { player.phase == .stopped && recorder.stopError != nil }
        let error = try XCTUnwrap(recorder.stopError)
        XCTAssertEqual(error.kind, .tokenInvalid)
        XCTAssertEqual(error.code, .tokenInvalid)
        XCTAssertEqual(error.httpStatus, 401)
        XCTAssertEqual(recorder.phases, [.waitingFirstFrame, .stopped])
        XCTAssertNil(player.state, "no frame was ever loaded")
    }

    func testUnknownRoom_stopsWithRoomNotFound() async throws {
        harness = try PlayerHarness()
        let player = try Player(loop: harness.clientLoop,
                                configuration: harness.playerConfiguration("nowhere", token: harness.token("viewer")))
        let recorder = PlayerRecorder(player)
        player.pause()
        await waitFor("the stop") { player.phase == .stopped && recorder.stopError != nil }
        let error = try XCTUnwrap(recorder.stopError)
        XCTAssertEqual(error.kind, .roomNotFound)
        XCTAssertEqual(error.httpStatus, 404)
        XCTAssertNil(player.state)
    }

    func testFrameThatDoesNotDecodeAsTheHostsGlobalStateType_raisesErrorWhenAppendFrame_andPlaybackGoesOn() async throws {
        struct Topic: Decodable { let topic: String }
        harness = try PlayerHarness()
        let from = wallMilliseconds()
        let teacher = try await harness.member("u1", room: "typed")
        for topic: JSON in ["a", 42, "c"] {
            try await teacher.request("setState", room: "typed", ["patch": ["globalState": ["topic": topic]]])
            try await Task.sleep(for: .milliseconds(20))
        }
        let host = try harness.host()
        host.registerGlobalStateType(Topic.self)
        let player = try Player(host: host, room: "typed", token: harness.token("viewer"), from: from,
                                to: wallMilliseconds()) { $0.progressInterval = .milliseconds(50) }
        let recorder = PlayerRecorder(player)
        player.playbackSpeed = 16
        player.play()
        await waitFor("the end") { player.phase == .ended }
        XCTAssertEqual(recorder.errors.count, 1, "\(recorder.errors)")
        XCTAssertEqual(recorder.errors.first?.kind, .frameNotDecodable)
        XCTAssertTrue(recorder.errors.first?.message.contains("Topic") ?? false)
        XCTAssertEqual(recorder.frameEvents.map(\.what), ["members", "globalState", "globalState", "globalState"])
        XCTAssertEqual(try player.globalState(as: Topic.self)?.topic, "c", "the frames after the bad one applied")
    }

    func testBeforeTheFirstFrame_stateIsEmpty_thenPauseLoadsItAndStaysPaused() async throws {
        harness = try PlayerHarness()
        let (from, to) = try await Lesson.record(harness, room: "early", gap: .milliseconds(30), steps: 3)
        let player = try Player(loop: harness.clientLoop, configuration: harness.playerConfiguration("early", from: from, to: to))
        let recorder = PlayerRecorder(player)
        XCTAssertEqual(player.phase, .waitingFirstFrame)
        XCTAssertNil(player.state)
        XCTAssertNil(player.globalState)
        XCTAssertNil(player.sceneState)
        XCTAssertNil(player.broadcastState)
        XCTAssertNil(player.members)
        let none = try await player.getPlayerState()
        XCTAssertNil(none)
        let phase = try await player.getPhase()
        XCTAssertEqual(phase, .waitingFirstFrame)
        XCTAssertEqual(player.timeInfo, PlayerTimeInfo(beginTimestamp: from))

        player.pause()
        await waitFor("the first frame") { player.phase == .pause }
        XCTAssertEqual(recorder.events.first, .loadFirstFrame)
        XCTAssertEqual(player.sceneState?.scenePath, "/init")
        XCTAssertEqual(player.globalState, [:], "the room at `from` was empty")
        XCTAssertEqual(player.scheduleTime, 0)
        let info = try await player.getTimeInfo()
        XCTAssertEqual(info.framesCount, 3)
        XCTAssertEqual(info.timeDuration, to - from)
        try await Task.sleep(for: .milliseconds(100))
        XCTAssertEqual(player.scheduleTime, 0, "paused: the clock stands still")

        player.playbackSpeed = 100
        XCTAssertEqual(player.playbackSpeed, 16, "speeds are clamped to 0.5...16")
        player.playbackSpeed = 0.1
        XCTAssertEqual(player.playbackSpeed, 0.5)
    }

    func testStop_releasesThePlayer_endsTheStreams_andIgnoresLaterCalls() async throws {
        harness = try PlayerHarness()
        let (from, to) = try await Lesson.record(harness, room: "stop", gap: .milliseconds(30), steps: 2)
        let player = try Player(loop: harness.clientLoop, configuration: harness.playerConfiguration("stop", from: from, to: to))
        let stream = player.events()
        player.playbackSpeed = 0.5
        player.play()
        await waitFor("playing") { player.phase == .playing }
        player.stop()
        var seen: [PlayerEvent] = []
        for await event in stream { seen.append(event) }
        XCTAssertEqual(seen.last, .phaseChanged(.stopped), "the stream ends after the stop")
        player.play()
        try await Task.sleep(for: .milliseconds(50))
        XCTAssertEqual(player.phase, .stopped)
    }

    func testDelegateOnACallbackQueue_hearsWhatTheStreamHears_inOrder_withTheStateAlreadyShown() async throws {
        harness = try PlayerHarness()
        let (from, to) = try await Lesson.record(harness, room: "queued", gap: .milliseconds(30), steps: 4)
        let queue = DispatchQueue(label: "player-callbacks")
        let delegate = QueueDelegate(queue: queue)
        let player = try Player(loop: harness.clientLoop, configuration: harness.playerConfiguration("queued", from: from, to: to),
                                delegate: delegate, callbackQueue: queue)
        let stream = player.events()
        player.playbackSpeed = 16
        player.play()
        await waitFor("the end") { delegate.calls.contains("phase ended") }
        player.stop()
        var streamed: [String] = []
        for await event in stream { streamed.append(QueueDelegate.describe(event)) }
        await waitFor("the stop callback") { delegate.calls.last == "phase stopped" }
        XCTAssertEqual(delegate.calls, streamed, "the same events, in the same order")
        XCTAssertEqual(delegate.calls.filter { $0.hasPrefix("magix") }, ["magix hint"])
        XCTAssertTrue(delegate.allOnQueue, "every callback ran on the callback queue")
        XCTAssertTrue(delegate.stateAtFirstFrame, "loadFirstFrame: the state is already there")
    }

    /// The whole recording, read with the project's HTTP client.
    private func fetchRecording(_ room: String, from: Int64, to: Int64) async throws -> RecordingSlice {
        let loop = harness.clientLoop
        let client = try loop.runAndWait { try HTTPClient.shared(on: loop) }
        let url = try HTTPURL("http://127.0.0.1:\(harness.port)/v1/rooms/\(room)/recording?from=\(from)&to=\(to)")
        let response = try await client.get(url, headers: [("Authorization", "Bearer \(harness.token("viewer"))")])
        return try RecordingSlice(ndjson: response.body)
    }
}

/// Live room content by sequence number, as a member saw it.
final class LiveCapture: @unchecked Sendable {
    // @unchecked Sendable: guarded by lock.
    private let lock = NSLock()
    private var bySeq: [Int64: RoomContent] = [:]

    func record(_ content: RoomContent) {
        lock.lock(); bySeq[content.seq] = content; lock.unlock()
    }

    func content(atSeq seq: Int64) -> RoomContent? {
        lock.lock(); defer { lock.unlock() }
        return bySeq[seq]
    }
}

/// Records delegate callbacks as strings, and whether they ran on `queue`.
final class QueueDelegate: PlayerEventDelegate, @unchecked Sendable {
    // @unchecked Sendable: guarded by lock.
    private let lock = NSLock()
    private var list: [String] = []
    private var offQueue = 0
    private var firstFrameState = false
    private let key = DispatchSpecificKey<Bool>()

    init(queue: DispatchQueue) {
        queue.setSpecific(key: key, value: true)
    }

    var calls: [String] {
        lock.lock(); defer { lock.unlock() }
        return list
    }
    var allOnQueue: Bool {
        lock.lock(); defer { lock.unlock() }
        return offQueue == 0
    }
    var stateAtFirstFrame: Bool {
        lock.lock(); defer { lock.unlock() }
        return firstFrameState
    }

    static func describe(_ event: PlayerEvent) -> String {
        switch event {
        case .phaseChanged(let phase): return "phase \(phase)"
        case .loadFirstFrame: return "loadFirstFrame"
        case .sliceChanged(let slice): return "slice \(slice)"
        case .playerStateChanged(let diff): return "state \(diff.keys)"
        case .stoppedWithError(let error): return "stopped \(error.kind)"
        case .scheduleTimeChanged(let time): return "time \(time)"
        case .errorWhenAppendFrame(let error): return "frameError \(error.kind)"
        case .magix(let magix): return "magix \(magix.event)"
        }
    }

    private func record(_ event: PlayerEvent) {
        let onQueue = DispatchQueue.getSpecific(key: key) == true
        lock.lock()
        list.append(Self.describe(event))
        if !onQueue { offQueue += 1 }
        lock.unlock()
    }

    func phaseChanged(_ player: Player, phase: PlayerPhase) { record(.phaseChanged(phase)) }
    func loadFirstFrame(_ player: Player) {
        let loaded = player.state != nil
        lock.lock(); firstFrameState = loaded; lock.unlock()
        record(.loadFirstFrame)
    }
    func sliceChanged(_ player: Player, slice: String) { record(.sliceChanged(slice)) }
    func playerStateChanged(_ player: Player, diff: PlayerStateDiff) { record(.playerStateChanged(diff)) }
    func stoppedWithError(_ player: Player, error: PlayerError) { record(.stoppedWithError(error)) }
    func scheduleTimeChanged(_ player: Player, time: Int64) { record(.scheduleTimeChanged(time)) }
    func errorWhenAppendFrame(_ player: Player, error: PlayerError) { record(.errorWhenAppendFrame(error)) }
    func fireMagixEvent(_ player: Player, event: MagixEvent) { record(.magix(event)) }
}
