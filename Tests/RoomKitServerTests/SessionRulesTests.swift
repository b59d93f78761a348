import RoomKitProtocol
import RoomKitServerCore
import XCTest

/// The session rules roomd and the simulator share, input by input, on an
/// injected clock (ms): no server, no socket.
final class SessionRulesTests: XCTestCase {
    private let clocks = SessionClocks(heartbeatTimeout: 90_000, sessionRetention: 1_200_000, tokenExpiryNotice: 30_000)

    /// A session of `user` logged in fresh at 0 with a token valid for an hour.
    private func fresh(_ id: String = "s-1", user: String = "u") -> SessionRules {
        SessionRules(id: id, userId: user, tokenExpiresAt: 3_600_000)
    }

    // MARK: Login

    func testLogin_ofANewUser_isFreshAndKicksNobody() {
        let decision = SessionRules.login(user: "u", heldOnConnection: false, resuming: nil, lookup: { _ in nil }, sessions: [fresh("s-1", user: "other")])
        XCTAssertEqual(decision, .fresh(kick: [], resumeExpired: false))
    }

    func testLogin_ofTheSameUserAgain_kicksEveryLiveSessionOfThatUser_butNotEndedOnes() {
        var ended = fresh("s-0")
        _ = ended.kick(code: .kickedByAdmin, now: 5)
        let sessions = [fresh("s-2"), fresh("s-1"), ended, fresh("s-3", user: "other")]
        let decision = SessionRules.login(user: "u", heldOnConnection: false, resuming: nil, lookup: { _ in nil }, sessions: sessions)
        XCTAssertEqual(decision, .fresh(kick: ["s-1", "s-2"], resumeExpired: false))
    }

    func testLogin_resumingARetainedSessionOfTheSameUser_resumesIt() {
        let retained = fresh("s-1")
        let decision = SessionRules.login(user: "u", heldOnConnection: false, resuming: "s-1", lookup: { $0 == "s-1" ? retained : nil }, sessions: [retained])
        XCTAssertEqual(decision, .resume("s-1"))
    }

    func testLogin_resumingAnotherUsersSession_isAFreshLoginThatKicksNobodyElse() {
        let theirs = fresh("s-1", user: "other")
        let decision = SessionRules.login(user: "u", heldOnConnection: false, resuming: "s-1", lookup: { $0 == "s-1" ? theirs : nil }, sessions: [theirs])
        XCTAssertEqual(decision, .fresh(kick: [], resumeExpired: true))
    }

    func testLogin_resumingAnUnknownOrForgottenSession_becomesFresh_andSaysTheResumeExpired() {
        let decision = SessionRules.login(user: "u", heldOnConnection: false, resuming: "s-gone", lookup: { _ in nil }, sessions: [fresh("s-1")])
        XCTAssertEqual(decision, .fresh(kick: ["s-1"], resumeExpired: true))
    }

    func testLogin_onAConnectionThatHoldsTheRoom_isRefused_beforeAnyKickOrResume() {
        let held = fresh("s-1")
        XCTAssertEqual(SessionRules.login(user: "u", heldOnConnection: true, resuming: nil, lookup: { _ in nil }, sessions: [held]),
                       .alreadyOnConnection)
        XCTAssertEqual(SessionRules.login(user: "u", heldOnConnection: true, resuming: "s-1", lookup: { _ in held }, sessions: [held]),
                       .alreadyOnConnection)
    }

    func testLogin_resumingAKickedSession_isRefusedWithTheKicksCode() {
        var kicked = fresh("s-1")
        _ = kicked.kick(code: .kickedDuplicateLogin, now: 10)
        let decision = SessionRules.login(user: "u", heldOnConnection: false, resuming: "s-1", lookup: { _ in kicked }, sessions: [kicked])
        XCTAssertEqual(decision, .refuse(.kickedDuplicateLogin))
        XCTAssertEqual(kicked.resume(tokenExpiresAt: 3_600_000, now: 20, clocks: clocks), .refused(.kickedDuplicateLogin))
    }

    func testLoggedIn_withAShortToken_warnsOnce() {
        var session = SessionRules(id: "s-1", userId: "u", tokenExpiresAt: 20_000)
        XCTAssertEqual(session.loggedIn(now: 0, clocks: clocks), .warn(remaining: 20))
        XCTAssertEqual(session.tick(now: 1_000, clocks: clocks), .none, "warned once per token")
        var long = fresh()
        XCTAssertEqual(long.loggedIn(now: 0, clocks: clocks), .none)
    }

    // MARK: Connection, heartbeat, retention

    func testDetach_keepsTheMemberUntilTheHeartbeatTimeoutAfterTheLastMessage_thenLeavesOnce() {
        var session = fresh()
        XCTAssertEqual(session.detach(now: 10_000, lastSeen: 4_000), .persist)
        XCTAssertEqual(session.state, .detached(since: 10_000, lastSeen: 4_000, visible: true))
        XCTAssertEqual(session.detach(now: 11_000, lastSeen: 4_000), .none, "detached already")
        XCTAssertEqual(session.tick(now: 93_999, clocks: clocks), .none)
        XCTAssertEqual(session.tick(now: 94_000, clocks: clocks), .leave)
        XCTAssertFalse(session.visible)
        XCTAssertEqual(session.tick(now: 95_000, clocks: clocks), .none, "left already")
    }

    func testDetachedSession_pastRetention_isForgotten() {
        var session = fresh()
        _ = session.detach(now: 10_000, lastSeen: 10_000)
        _ = session.tick(now: 100_000, clocks: clocks)
        XCTAssertEqual(session.tick(now: 1_209_999, clocks: clocks), .none)
        XCTAssertEqual(session.tick(now: 1_210_000, clocks: clocks), .forget(leave: false))
    }

    func testRetentionShorterThanTheHeartbeat_forgetsAndLeavesTogether() {
        let short = SessionClocks(heartbeatTimeout: 90_000, sessionRetention: 1_000, tokenExpiryNotice: 30_000)
        var session = fresh()
        _ = session.detach(now: 0, lastSeen: 0)
        XCTAssertEqual(session.tick(now: 1_000, clocks: short), .forget(leave: true))
    }

    func testConnectionSilence_isCountedFromTheLastMessage() {
        XCTAssertFalse(clocks.isSilent(lastMessageAt: 1_000, now: 90_999))
        XCTAssertTrue(clocks.isSilent(lastMessageAt: 1_000, now: 91_000))
    }

    func testResume_afterTheMemberLeft_rejoinsIt_andWarnsTheNewConnectionOfAShortToken() {
        var session = fresh()
        _ = session.loggedIn(now: 0, clocks: clocks)
        _ = session.detach(now: 1_000, lastSeen: 1_000)
        XCTAssertEqual(session.tick(now: 91_000, clocks: clocks), .leave)
        XCTAssertEqual(session.resume(tokenExpiresAt: 100_000, now: 95_000, clocks: clocks), .resumed(rejoin: true, warn: 5))
        XCTAssertEqual(session.state, .attached(warnedForExpiry: 100_000))
        XCTAssertTrue(session.visible)
    }

    func testResume_withinTheHeartbeat_doesNotRejoin_andANewConnectionIsWarnedAgain() {
        var session = SessionRules(id: "s-1", userId: "u", tokenExpiresAt: 20_000)
        XCTAssertEqual(session.loggedIn(now: 0, clocks: clocks), .warn(remaining: 20))
        _ = session.detach(now: 1_000, lastSeen: 1_000)
        XCTAssertEqual(session.resume(tokenExpiresAt: 20_000, now: 2_000, clocks: clocks), .resumed(rejoin: false, warn: 18))
    }

    func testReattached_afterAReload_isAttachedSilently_butAKickedOneStaysEnded() {
        var session = SessionRules(restoring: "s-1", userId: "u", tokenExpiresAt: 3_600_000, detachedAt: nil, visible: true,
                                   endedCode: nil, now: 500)
        XCTAssertEqual(session.state, .detached(since: 500, lastSeen: 500, visible: true))
        session.reattached()
        XCTAssertEqual(session.state, .attached(warnedForExpiry: nil))
        var ended = SessionRules(restoring: "s-2", userId: "u", tokenExpiresAt: 3_600_000, detachedAt: 100, visible: false,
                                 endedCode: .kickedByAdmin, now: 500)
        ended.reattached()
        XCTAssertEqual(ended.state, .ended(code: .kickedByAdmin, since: 100))
        XCTAssertEqual(ended.tick(now: 1_200_100, clocks: clocks), .forget(leave: false))
    }

    func testLogout_forgetsTheSession_andTheMemberLeaves() {
        var session = fresh()
        XCTAssertEqual(session.logout(now: 5), .forget(leave: true))
        XCTAssertFalse(session.visible)
    }

    // MARK: Kicks

    func testKick_ofAnAttachedSession_notifiesItsConnection_andTheMemberLeaves_onlyOnce() {
        var session = fresh()
        XCTAssertEqual(session.kick(code: .kickedDuplicateLogin, now: 7), .kicked(notify: true, leave: true))
        XCTAssertEqual(session.state, .ended(code: .kickedDuplicateLogin, since: 7))
        XCTAssertEqual(session.kick(code: .kickedByAdmin, now: 8), .none, "ended already: the first code stands")
        XCTAssertEqual(session.endedCode, .kickedDuplicateLogin)
    }

    func testKick_ofADetachedSessionWhoseMemberLeft_notifiesNobody_andRetentionCountsFromTheDetach() {
        var session = fresh()
        _ = session.detach(now: 1_000, lastSeen: 1_000)
        _ = session.tick(now: 91_000, clocks: clocks)
        XCTAssertEqual(session.kick(code: .kickedByAdmin, now: 100_000), .kicked(notify: false, leave: false))
        XCTAssertEqual(session.tick(now: 1_200_999, clocks: clocks), .none)
        XCTAssertEqual(session.tick(now: 1_201_000, clocks: clocks), .forget(leave: false))
    }

    // MARK: Token expiry

    func testToken_isWarnedOnceWithinTheNotice_thenExpiryKicksWith1002056() {
        var session = SessionRules(id: "s-1", userId: "u", tokenExpiresAt: 100_000)
        XCTAssertEqual(session.loggedIn(now: 0, clocks: clocks), .none)
        XCTAssertEqual(session.tick(now: 69_999, clocks: clocks), .none)
        XCTAssertEqual(session.tick(now: 70_000, clocks: clocks), .warn(remaining: 30))
        XCTAssertEqual(session.tick(now: 80_000, clocks: clocks), .none, "once per token")
        XCTAssertEqual(session.tick(now: 100_000, clocks: clocks), .kick(code: .kickedTokenExpired, warnFirst: nil))
        XCTAssertEqual(session.endedCode, .kickedTokenExpired)
        XCTAssertEqual(session.tick(now: 100_001, clocks: clocks), .none)
    }

    func testToken_expiredBeforeAnyWarning_isWarnedThenKicked() {
        var session = SessionRules(id: "s-1", userId: "u", tokenExpiresAt: 100_000)
        XCTAssertEqual(session.tick(now: 100_500, clocks: clocks), .kick(code: .kickedTokenExpired, warnFirst: 0))
    }

    func testToken_ofADetachedSession_doesNotKick() {
        var session = SessionRules(id: "s-1", userId: "u", tokenExpiresAt: 100_000)
        _ = session.detach(now: 50_000, lastSeen: 50_000)
        XCTAssertEqual(session.tick(now: 120_000, clocks: clocks), .none)
        XCTAssertNil(session.endedCode)
    }

    func testRenewal_withANewShortExpiry_warnsAtOnce_butTheSameExpiryIsNotWarnedAgain() {
        var session = SessionRules(id: "s-1", userId: "u", tokenExpiresAt: 100_000)
        XCTAssertEqual(session.tick(now: 75_000, clocks: clocks), .warn(remaining: 25))
        XCTAssertEqual(session.renewed(tokenExpiresAt: 100_000, now: 76_000, clocks: clocks), .none, "the same token")
        XCTAssertEqual(session.renewed(tokenExpiresAt: 101_000, now: 77_000, clocks: clocks), .warn(remaining: 24))
        XCTAssertEqual(session.renewed(tokenExpiresAt: 3_600_000, now: 78_000, clocks: clocks), .none)
        XCTAssertEqual(session.tick(now: 101_000, clocks: clocks), .none, "the renewed token did not expire")
    }

    func testAnnouncedExpiry_warnsWhateverTheNotice_andExpiresThen() {
        var session = SessionRules(id: "s-1", userId: "u", tokenExpiresAt: .max)
        XCTAssertEqual(session.announceExpiry(at: 200_000, now: 80_000), .warn(remaining: 120))
        XCTAssertEqual(session.tick(now: 190_000, clocks: clocks), .none)
        XCTAssertEqual(session.tick(now: 200_000, clocks: clocks), .kick(code: .kickedTokenExpired, warnFirst: nil))
        var detached = SessionRules(id: "s-2", userId: "u", tokenExpiresAt: .max)
        _ = detached.detach(now: 0, lastSeen: 0)
        XCTAssertEqual(detached.announceExpiry(at: 10_000, now: 1), .none, "no connection to warn")
    }
}
