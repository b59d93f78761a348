import RoomKitTestSupport
import XCTest

@testable import RoomKitProtocol

/// `ClientEnvelope.scanLogin`, roomd's byte-level read of login requests: it
/// must agree with the full path (`JSON.parse`, then `ClientEnvelope.decode`)
/// whenever it answers, and decline whatever that path refuses, so bad
/// input keeps the full decoder's error codes.
final class LoginRequestScanTests: XCTestCase {
    private func full(_ text: String) -> ClientEnvelope? {
        guard let json = try? JSON.parse(Array(text.utf8)), case .success(let envelope) = ClientEnvelope.decode(json) else {
            return nil
        }
        return envelope
    }

    private func assertAgrees(_ text: String, declines: Bool = false, file: StaticString = #filePath, line: UInt = #line) {
        let expected = full(text)
        if let scanned = ClientEnvelope.scanLogin(Array(text.utf8)) {
            guard let expected else { return XCTFail("scanned, but the full path refuses: \(text)", file: file, line: line) }
            XCTAssertEqual(scanned, expected, text, file: file, line: line)
        } else if !declines {
            XCTAssertTrue(expected.map { if case .login = $0.request { return false }; return true } ?? true,
                          "declined a login the full path reads: \(text)", file: file, line: line)
        }
    }

    func testLoginsTheEngineSends_areScannedAsDecoded() throws {
        for request in [
            LoginRequest(token: "a.b.c", user: LoginUser(id: "bot")),
            LoginRequest(token: "a.b.c", user: LoginUser(id: "bot", name: "Bot B é", payload: ["k": [1, 2.5, "é"], "a": nil]),
                         writable: false, resume: ResumePoint(session: "s-0123", seq: 41), fence: 7),
            LoginRequest(token: "t", user: LoginUser(id: "u", payload: "text"), resume: ResumePoint(session: "s", seq: 0)),
        ] {
            let envelope = ClientEnvelope(id: 9, room: "room-1", request: .login(request))
            let text = String(decoding: envelope.serialized(), as: UTF8.self)
            XCTAssertEqual(ClientEnvelope.scanLogin(envelope.serialized()), envelope, text)
            assertAgrees(text)
            let tree = envelope.json.serialized(sortedKeys: true)
            XCTAssertEqual(ClientEnvelope.scanLogin(tree), envelope)
        }
    }

    func testForms_agreeWithTheFullPath() {
        let base = #""op":"login","id":3,"room":"r1","token":"tok","user":{"id":"bot"}"#
        for text in [
            "{\(base)}", " { \(base.replacingOccurrences(of: ":", with: " : ")) } ",
            "{\(base),\"writable\":false,\"fence\":0,\"resume\":{\"seq\":5,\"session\":\"s-1\"}}",
            "{\(base),\"extra\":[1,{\"x\":null}]}",
            #"{"user":{"payload":{"b":1, "a":2},"name":"N","id":"bot"},"token":"tok","room":"r1","id":3,"op":"login"}"#,
        ] {
            XCTAssertNotNil(ClientEnvelope.scanLogin(Array(text.utf8)), text)
            assertAgrees(text)
        }
        for text in [
            "{\(base.replacingOccurrences(of: "\"id\":3", with: "\"id\":0"))}",
            "{\(base.replacingOccurrences(of: "\"id\":3", with: "\"id\":3.5"))}",
            "{\(base.replacingOccurrences(of: "\"room\":\"r1\"", with: "\"room\":\"r 1\""))}",
            "{\(base.replacingOccurrences(of: "{\"id\":\"bot\"}", with: "{\"id\":\"\"}"))}",
            "{\(base.replacingOccurrences(of: "{\"id\":\"bot\"}", with: "{\"name\":\"x\"}"))}",
            "{\(base.replacingOccurrences(of: "{\"id\":\"bot\"}", with: "\"bot\""))}",
            "{\(base.replacingOccurrences(of: "{\"id\":\"bot\"}", with: "{\"id\":\"bot\",\"id\":\"b\"}"))}",
            "{\(base.replacingOccurrences(of: "{\"id\":\"bot\"}", with: "{\"id\":\"bot\",\"name\":\"\(String(repeating: "n", count: 257))\"}"))}",
            "{\(base),\"resume\":{\"session\":\"\",\"seq\":1}}",
            "{\(base),\"resume\":{\"session\":\"s\",\"seq\":-1}}",
            "{\(base),\"resume\":{\"session\":\"s\"}}",
            "{\(base),\"resume\":[]}",
            "{\(base),\"fence\":-1}",
            "{\(base),\"writable\":1}",
            "{\(base),\"op\":\"login\"}",
            "{\(base)}x",
            "{\(base.replacingOccurrences(of: "\"op\":\"login\"", with: "\"op\":\"logout\""))}",
            "{\(base.replacingOccurrences(of: ",\"token\":\"tok\"", with: ""))}",
        ] {
            XCTAssertNil(ClientEnvelope.scanLogin(Array(text.utf8)), text)
            assertAgrees(text)
        }
        // Taken by the full path, left to it: escapes, nulls.
        for text in [
            "{\(base.replacingOccurrences(of: "\"tok\"", with: "\"t\\u006fk\""))}",
            "{\(base),\"writable\":null}",
            "{\(base),\"fence\":null}",
            "{\(base.replacingOccurrences(of: "{\"id\":\"bot\"}", with: "{\"id\":\"bot\",\"name\":\"B\\\"\"}"))}",
            "{\(base.replacingOccurrences(of: "{\"id\":\"bot\"}", with: "{\"id\":\"bot\",\"payload\":null,\"name\":null}"))}",
        ] {
            XCTAssertNil(ClientEnvelope.scanLogin(Array(text.utf8)), text)
            XCTAssertNotNil(full(text), text)
        }
    }
}
