import RoomKitProtocol
import RoomKitTokens
import XCTest

/// Issue #27 §1: the checked path every number from outside takes, and the
/// pure entry points built on it (recording window, token claims, hello).
final class ExternalNumberTests: XCTestCase {
    func testInteger_acceptsOnlyDecimalTextInRange_andNamesFieldAndRange() throws {
        let range: ClosedRange<Int64> = 0...100
        XCTAssertEqual(try ExternalNumber.integer("42", field: "from", in: range), 42)
        XCTAssertEqual(try ExternalNumber.integer("0", field: "from", in: range), 0)
        for text in ["-1", "101", "9223372036854775808", "-9223372036854775809", "1e3", "0x10", "", " 1", "nan", "inf"] {
            XCTAssertThrowsError(try ExternalNumber.integer(text, field: "from", in: range), text) { error in
                let text = "\(error)"
                XCTAssertTrue(text.hasPrefix("from: must be "), text)
                XCTAssertTrue(text.contains("0...100"), text)
            }
        }
        XCTAssertEqual(try ExternalNumber.integer("-9223372036854775808", field: "x", in: .min ... .max), .min)
    }

    func testSeconds_refusesNaNInfinityAndOutOfRange_andRoundsToMilliseconds() throws {
        let half: Double = 0.5, day: Double = 86_400
        XCTAssertEqual(try ExternalNumber.seconds(half, field: "--x", in: ExternalNumber.shortSeconds), .milliseconds(500))
        XCTAssertEqual(try ExternalNumber.seconds(day, field: "--x", in: ExternalNumber.shortSeconds), .seconds(86_400))
        for value: Double in [-1, 0, 0.0004, 86_400.5, 1e19, 1e300, -1e300, .nan, .infinity, -.infinity] {
            XCTAssertThrowsError(try ExternalNumber.seconds(value, field: "--x", in: ExternalNumber.shortSeconds), "\(value)") {
                XCTAssertTrue("\($0)".hasPrefix("--x: must be a number of seconds in 0.001...86400, got "), "\($0)")
            }
        }
    }

    func testDurationMilliseconds_saturatesInsteadOfTrapping() {
        XCTAssertEqual(Duration.seconds(Int64.max).milliseconds, .max)
        XCTAssertEqual(Duration.seconds(Int64.min).milliseconds, 0)
        XCTAssertEqual(Duration.milliseconds(1500).milliseconds, 1500)
    }

    /// The recording query at Int64's edges: 10 of 54 such combinations
    /// trapped roomd (`to=9223372036854775807`, `from=-9223372036854775808`).
    func testRecordingWindow_atInt64Edges_isA1009006ErrorOrASaneWindow() throws {
        let edges = ["-9223372036854775808", "-9223372036854775807", "-1", "0", "1",
                     "9223372036854775806", "9223372036854775807", nil]
        let created: Int64 = 1_700_000_000_000, now: Int64 = 1_700_000_100_000
        var errors = 0
        for name in ["from", "to", "sliceStart", "sliceEnd"] {
            for other in ["from", "to", "sliceStart", "sliceEnd"] where other != name {
                for a in edges {
                    for b in edges {
                        let query = [name: a, other: b].compactMapValues { $0 }
                        do {
                            let window = try RecordingWindow(query: { query[$0] }, created: created, now: now)
                            XCTAssertLessThanOrEqual(window.begin, window.end)
                            XCTAssertTrue(ExternalNumber.epochMilliseconds.contains(window.begin))
                            XCTAssertTrue(ExternalNumber.epochMilliseconds.contains(window.end))
                            XCTAssertGreaterThanOrEqual(window.sliceFrom, window.begin)
                            XCTAssertLessThanOrEqual(window.sliceTo, window.end)
                        } catch {
                            XCTAssertEqual(error.code, .invalidArgument, "\(query): \(error)")
                            errors += 1
                        }
                    }
                }
            }
        }
        XCTAssertGreaterThan(errors, 0)
        XCTAssertThrowsError(try RecordingWindow(query: { $0 == "to" ? "9223372036854775807" : nil }, created: created, now: now)) {
            XCTAssertEqual("\($0)", "1009006 (invalidArgument): to: must be in 0...253402300799999, got 9223372036854775807")
        }
    }

    /// A token whose `exp` is 9.22e15 or more made `exp * 1000` trap roomd
    /// on login, resume and renewToken: such claims are now refused.
    func testTokenClaims_outsideYear9999_areRefusedAsBadClaims() throws {
        let signer = TokenSigner(secret: "s")
        let now: Int64 = 1_700_000_000
        for exp in [9_300_000_000_000_000, .max, ExternalNumber.maxEpochSeconds + 1] as [Int64] {
            let token = signer.sign(TokenClaims(sub: "u", room: "*", role: .writer, exp: exp, iat: now))
            XCTAssertThrowsError(try signer.verify(token, now: now), "\(exp)") {
                XCTAssertEqual(($0 as? TokenError)?.reason, .badClaims)
            }
        }
        for iat in [Int64.min, -1] {
            let token = signer.sign(TokenClaims(sub: "u", room: "*", role: .writer, exp: now + 60, iat: iat))
            XCTAssertThrowsError(try signer.verify(token, now: now), "\(iat)")
        }
        let last = signer.sign(TokenClaims(sub: "u", room: "*", role: .writer, exp: ExternalNumber.maxEpochSeconds, iat: now))
        XCTAssertEqual(try signer.verify(last, now: now).expiresAtMilliseconds, ExternalNumber.maxEpochSeconds * 1000)
    }

    /// A hello whose heartbeat is Int64.max crashed roombot: now 1009006.
    func testHelloHeartbeat_outOfRange_isAProtocolError() throws {
        XCTAssertEqual(try HelloReply.heartbeat(fields: [:]).interval, 10_000)
        XCTAssertEqual(try HelloReply.heartbeat(fields: ["heartbeatInterval": 5, "heartbeatTimeout": 7]).timeout, 7)
        for value: JSON in [.int(.max), .int(.min), 0, -1, 86_400_001, 1e300, 0.5, "10"] {
            for key in ["heartbeatInterval", "heartbeatTimeout"] {
                XCTAssertThrowsError(try HelloReply.heartbeat(fields: [key: value]), "\(key) \(value)") {
                    XCTAssertTrue("\($0)".contains("hello.\(key)"), "\($0)")
                }
                XCTAssertThrowsError(try HelloReply(fields: HelloReply(connection: "c", serverTime: 1).fields.merging([key: value]) { $1 }))
            }
        }
    }
}
