import RoomKitTestSupport
import XCTest

@testable import RoomKitProtocol

final class MessageDecodeTests: XCTestCase {
    private func decode(_ text: String) -> Result<ClientEnvelope, DecodeFailure> {
        ClientEnvelope.decode(parsed(text))
    }

    private let image = #"{"uuid":"i1","url":"https://x/i.png","x":1,"y":2.5,"width":10,"height":20}"#

    // MARK: Valid example of every op

    func testDecode_validExampleOfEveryOp_producesTypedRequest() throws {
        let examples: [(String, ClientRequest)] = [
            (#"{"op":"hello","id":1,"client":"roomkit-swift/0.1"}"#, .hello(client: "roomkit-swift/0.1")),
            (#"{"op":"ping","t":1732147200000}"#, .ping(t: 1_732_147_200_000)),
            (
                #"{"op":"login","id":2,"room":"r1","token":"a.b.c","user":{"id":"u1","name":"Ann","payload":{"c":"red"}},"writable":false,"resume":{"session":"s-1","seq":57}}"#,
                .login(
                    LoginRequest(
                        token: "a.b.c", user: LoginUser(id: "u1", name: "Ann", payload: ["c": "red"]), writable: false,
                        resume: ResumePoint(session: "s-1", seq: 57)))
            ),
            (#"{"op":"logout","id":3,"room":"r1"}"#, .logout),
            (#"{"op":"setState","id":4,"room":"r1","patch":{"globalState":{"a":1}}}"#, .setState(patch: ["globalState": ["a": 1]])),
            (#"{"op":"setMemberState","id":5,"room":"r1","memberState":{"tool":"pen"}}"#, .setMemberState(["tool": "pen"])),
            (
                #"{"op":"magix","id":6,"room":"r1","event":"cursor","payload":[1,2],"to":["u2","u3"]}"#,
                .magix(event: "cursor", payload: [1, 2], to: ["u2", "u3"])
            ),
            (
                #"{"op":"putScenes","id":7,"room":"r1","dir":"/deck","scenes":[{"name":"p1","ppt":{"src":"https://x/1.png","width":800,"height":600}},{"name":"p2"}],"index":0}"#,
                .putScenes(
                    dir: "/deck",
                    scenes: [Scene(name: "p1", ppt: PPT(src: "https://x/1.png", width: 800, height: 600)), Scene(name: "p2")],
                    index: 0)
            ),
            (#"{"op":"setScenePath","id":8,"room":"r1","path":"/deck/p1"}"#, .setScenePath(path: "/deck/p1")),
            (#"{"op":"removeScenes","id":9,"room":"r1","path":"/"}"#, .removeScenes(path: "/")),
            (
                #"{"op":"insertImage","id":10,"room":"r1","image":\#(image)}"#,
                .insertImage(Image(uuid: "i1", url: "https://x/i.png", x: 1, y: 2.5, width: 10, height: 20))
            ),
            (#"{"op":"setViewMode","id":11,"room":"r1","mode":"broadcaster"}"#, .setViewMode(.broadcaster)),
            (#"{"op":"publishStream","id":12,"room":"r1","stream":{"id":"cam","extraInfo":"720p"}}"#, .publishStream(id: "cam", extraInfo: "720p")),
            (#"{"op":"unpublishStream","id":13,"room":"r1","streamID":"cam"}"#, .unpublishStream(streamID: "cam")),
            (#"{"op":"setExtraInfo","id":14,"room":"r1","key":"topic","value":""}"#, .setExtraInfo(key: "topic", value: "")),
            (#"{"op":"renewToken","id":15,"room":"r1","token":"x.y.z"}"#, .renewToken(token: "x.y.z")),
            (#"{"op":"setWritable","id":16,"room":"r1","writable":true}"#, .setWritable(true)),
        ]
        XCTAssertEqual(Set(examples.map { $0.1.op }), Set(ClientOp.allCases))
        for (text, expected) in examples {
            switch decode(text) {
            case .success(let envelope):
                XCTAssertEqual(envelope.request, expected, text)
                XCTAssertEqual(envelope.op, expected.op.rawValue)
                XCTAssertEqual(envelope.room, expected.op.isRoomScoped ? "r1" : nil, text)
                // The client-side encoding decodes back to the same envelope.
                XCTAssertEqual(try? ClientEnvelope.decode(envelope.json).get(), envelope, text)
            case .failure(let failure):
                XCTFail("\(text): \(failure.error)")
            }
        }
    }

    func testDecode_defaults_applyWhenOptionalFieldsAbsent() throws {
        let login = try decode(#"{"op":"login","id":1,"room":"r","token":"t","user":{"id":"u","name":null}}"#).get()
        XCTAssertEqual(login.request, .login(LoginRequest(token: "t", user: LoginUser(id: "u"))))
        XCTAssertEqual(try decode(#"{"op":"ping"}"#).get().request, .ping(t: nil))
        XCTAssertEqual(try decode(#"{"op":"ping","id":3}"#).get().id, 3)
        XCTAssertEqual(try decode(#"{"op":"hello","id":1}"#).get().request, .hello(client: nil))
        XCTAssertEqual(
            try decode(#"{"op":"magix","id":1,"room":"r","event":"e"}"#).get().request, .magix(event: "e", payload: nil, to: nil))
        XCTAssertEqual(
            try decode(#"{"op":"putScenes","id":1,"room":"r","dir":"/","scenes":[{"name":"a"}]}"#).get().request,
            .putScenes(dir: "/", scenes: [Scene(name: "a")], index: nil))
    }

    func testDecode_unknownFieldsAndIntegralDoubleID_areAccepted() throws {
        let envelope = try decode(#"{"op":"logout","id":7.0,"room":"r","future":{"x":1},"zzz":null}"#).get()
        XCTAssertEqual(envelope.id, 7)
        XCTAssertEqual(envelope.request, .logout)
        XCTAssertNil(try decode(#"{"op":"hello","id":1,"room":5}"#).get().room)
    }

    // MARK: Table of invalid messages

    /// (message, expected code, whether the failure keeps an id to reply to)
    private let invalidTable: [(String, ErrorCode, Bool)] = [
        // Not an object
        ("[]", .malformed, false), ("\"hello\"", .malformed, false), ("null", .malformed, false), ("7", .malformed, false),
        // op
        (#"{"id":1}"#, .malformed, true), (#"{"op":5,"id":1}"#, .malformed, true), (#"{"op":null}"#, .malformed, false),
        (#"{"op":"fly","id":1}"#, .unknownOp, true), (#"{"op":"fly"}"#, .unknownOp, false), (#"{"op":"Login","id":1}"#, .unknownOp, true),
        (#"{"op":"reply","id":1}"#, .unknownOp, true),
        // id
        (#"{"op":"hello"}"#, .malformed, false), (#"{"op":"logout","room":"r"}"#, .malformed, false),
        (#"{"op":"hello","id":"1"}"#, .malformed, false), (#"{"op":"hello","id":null}"#, .malformed, false),
        (#"{"op":"hello","id":0}"#, .invalidArgument, false), (#"{"op":"hello","id":-4}"#, .invalidArgument, false),
        (#"{"op":"hello","id":1.5}"#, .invalidArgument, false), (#"{"op":"hello","id":1e30}"#, .invalidArgument, false),
        (#"{"op":"ping","id":"x"}"#, .malformed, false),
        // room
        (#"{"op":"logout","id":1}"#, .malformed, true), (#"{"op":"logout","id":1,"room":7}"#, .malformed, true),
        (#"{"op":"logout","id":1,"room":""}"#, .invalidArgument, true), (#"{"op":"logout","id":1,"room":"a b"}"#, .invalidArgument, true),
        (#"{"op":"logout","id":1,"room":"*"}"#, .invalidArgument, true),
        // hello
        (#"{"op":"hello","id":1,"client":5}"#, .malformed, true),
        // login
        (#"{"op":"login","id":1,"room":"r","user":{"id":"u"}}"#, .malformed, true),
        (#"{"op":"login","id":1,"room":"r","token":5,"user":{"id":"u"}}"#, .malformed, true),
        (#"{"op":"login","id":1,"room":"r","token":"t"}"#, .malformed, true),
        (#"{"op":"login","id":1,"room":"r","token":"t","user":"u"}"#, .malformed, true),
        (#"{"op":"login","id":1,"room":"r","token":"t","user":{}}"#, .malformed, true),
        (#"{"op":"login","id":1,"room":"r","token":"t","user":{"id":""}}"#, .invalidArgument, true),
        (#"{"op":"login","id":1,"room":"r","token":"t","user":{"id":"u","name":3}}"#, .malformed, true),
        (#"{"op":"login","id":1,"room":"r","token":"t","user":{"id":"u"},"writable":"yes"}"#, .malformed, true),
        (#"{"op":"login","id":1,"room":"r","token":"t","user":{"id":"u"},"resume":true}"#, .malformed, true),
        (#"{"op":"login","id":1,"room":"r","token":"t","user":{"id":"u"},"resume":{"session":"s"}}"#, .malformed, true),
        (#"{"op":"login","id":1,"room":"r","token":"t","user":{"id":"u"},"resume":{"session":"s","seq":-1}}"#, .invalidArgument, true),
        (#"{"op":"login","id":1,"room":"r","token":"t","user":{"id":"u"},"resume":{"session":"","seq":1}}"#, .invalidArgument, true),
        // setState
        (#"{"op":"setState","id":1,"room":"r"}"#, .malformed, true),
        (#"{"op":"setState","id":1,"room":"r","patch":[1]}"#, .malformed, true),
        (#"{"op":"setState","id":1,"room":"r","patch":{"zoomScale":1}}"#, .invalidArgument, true),
        (#"{"op":"setState","id":1,"room":"r","patch":{"globalState":3}}"#, .invalidArgument, true),
        (#"{"op":"setState","id":1,"room":"r","patch":{"sceneState":{"scenePath":"/x","scenes":[],"index":0}}}"#, .invalidArgument, true),
        (#"{"op":"setState","id":1,"room":"r","patch":{"broadcastState":{"mode":"solo"}}}"#, .invalidArgument, true),
        // setMemberState
        (#"{"op":"setMemberState","id":1,"room":"r","memberState":"x"}"#, .malformed, true),
        (#"{"op":"setMemberState","id":1,"room":"r"}"#, .malformed, true),
        // magix
        (#"{"op":"magix","id":1,"room":"r"}"#, .malformed, true),
        (#"{"op":"magix","id":1,"room":"r","event":1}"#, .malformed, true),
        (#"{"op":"magix","id":1,"room":"r","event":""}"#, .invalidArgument, true),
        (#"{"op":"magix","id":1,"room":"r","event":"\#(String(repeating: "e", count: 129))"}"#, .invalidArgument, true),
        (#"{"op":"magix","id":1,"room":"r","event":"e","to":"u2"}"#, .malformed, true),
        (#"{"op":"magix","id":1,"room":"r","event":"e","to":["u2",3]}"#, .malformed, true),
        (#"{"op":"magix","id":1,"room":"r","event":"e","to":[""]}"#, .invalidArgument, true),
        // putScenes
        (#"{"op":"putScenes","id":1,"room":"r","scenes":[{"name":"a"}]}"#, .malformed, true),
        (#"{"op":"putScenes","id":1,"room":"r","dir":"/","scenes":{"name":"a"}}"#, .malformed, true),
        (#"{"op":"putScenes","id":1,"room":"r","dir":"/","scenes":[{"name":"a"}],"index":"0"}"#, .malformed, true),
        (#"{"op":"putScenes","id":1,"room":"r","dir":"/","scenes":[{"name":"a"}],"index":-1}"#, .invalidArgument, true),
        (#"{"op":"putScenes","id":1,"room":"r","dir":"/","scenes":[{"name":"a"}],"index":0.5}"#, .invalidArgument, true),
        (#"{"op":"putScenes","id":1,"room":"r","dir":"deck","scenes":[{"name":"a"}]}"#, .invalidArgument, true),
        (#"{"op":"putScenes","id":1,"room":"r","dir":"/a/","scenes":[{"name":"a"}]}"#, .invalidArgument, true),
        (#"{"op":"putScenes","id":1,"room":"r","dir":"/","scenes":[]}"#, .invalidArgument, true),
        (#"{"op":"putScenes","id":1,"room":"r","dir":"/","scenes":[{"name":"a/b"}]}"#, .invalidArgument, true),
        (#"{"op":"putScenes","id":1,"room":"r","dir":"/","scenes":[{"name":"a"},{"name":"a"}]}"#, .invalidArgument, true),
        (#"{"op":"putScenes","id":1,"room":"r","dir":"/","scenes":[{"name":"a","ppt":{"src":"s","width":"1","height":1}}]}"#, .malformed, true),
        (#"{"op":"putScenes","id":1,"room":"r","dir":"/","scenes":[{}]}"#, .malformed, true),
        // setScenePath / removeScenes
        (#"{"op":"setScenePath","id":1,"room":"r"}"#, .malformed, true),
        (#"{"op":"setScenePath","id":1,"room":"r","path":3}"#, .malformed, true),
        (#"{"op":"setScenePath","id":1,"room":"r","path":"init"}"#, .invalidArgument, true),
        (#"{"op":"setScenePath","id":1,"room":"r","path":"/a//b"}"#, .invalidArgument, true),
        (#"{"op":"removeScenes","id":1,"room":"r","path":""}"#, .invalidArgument, true),
        (#"{"op":"removeScenes","id":1,"room":"r","path":["/a"]}"#, .malformed, true),
        // insertImage
        (#"{"op":"insertImage","id":1,"room":"r"}"#, .malformed, true),
        (#"{"op":"insertImage","id":1,"room":"r","image":{"uuid":"i","url":"u","x":1,"y":1,"width":1}}"#, .malformed, true),
        (#"{"op":"insertImage","id":1,"room":"r","image":{"uuid":"i","url":"u","x":true,"y":1,"width":1,"height":1}}"#, .malformed, true),
        (#"{"op":"insertImage","id":1,"room":"r","image":{"uuid":"i","url":"u","x":1,"y":1,"width":-1,"height":1}}"#, .invalidArgument, true),
        // setViewMode
        (#"{"op":"setViewMode","id":1,"room":"r","mode":"solo"}"#, .invalidArgument, true),
        (#"{"op":"setViewMode","id":1,"room":"r","mode":1}"#, .malformed, true),
        (#"{"op":"setViewMode","id":1,"room":"r"}"#, .malformed, true),
        // streams
        (#"{"op":"publishStream","id":1,"room":"r"}"#, .malformed, true),
        (#"{"op":"publishStream","id":1,"room":"r","stream":{"extraInfo":"x"}}"#, .malformed, true),
        (#"{"op":"publishStream","id":1,"room":"r","stream":{"id":""}}"#, .invalidArgument, true),
        (#"{"op":"publishStream","id":1,"room":"r","stream":{"id":"s","extraInfo":1}}"#, .malformed, true),
        (#"{"op":"publishStream","id":1,"room":"r","stream":{"id":"s","extraInfo":"\#(String(repeating: "x", count: 4097))"}}"#, .invalidArgument, true),
        (#"{"op":"unpublishStream","id":1,"room":"r","streamID":1}"#, .malformed, true),
        (#"{"op":"unpublishStream","id":1,"room":"r","streamID":""}"#, .invalidArgument, true),
        // setExtraInfo
        (#"{"op":"setExtraInfo","id":1,"room":"r","key":"k"}"#, .malformed, true),
        (#"{"op":"setExtraInfo","id":1,"room":"r","key":"k","value":1}"#, .malformed, true),
        (#"{"op":"setExtraInfo","id":1,"room":"r","key":"","value":"v"}"#, .invalidArgument, true),
        (#"{"op":"setExtraInfo","id":1,"room":"r","key":"\#(String(repeating: "k", count: 129))","value":"v"}"#, .invalidArgument, true),
        (#"{"op":"setExtraInfo","id":1,"room":"r","key":"k","value":"\#(String(repeating: "v", count: 4097))"}"#, .invalidArgument, true),
        // renewToken / setWritable
        (#"{"op":"renewToken","id":1,"room":"r"}"#, .malformed, true),
        (#"{"op":"renewToken","id":1,"room":"r","token":{}}"#, .malformed, true),
        (#"{"op":"setWritable","id":1,"room":"r","writable":"true"}"#, .malformed, true),
        (#"{"op":"setWritable","id":1,"room":"r"}"#, .malformed, true),
    ]

    func testDecode_invalidMessagesTable_reportsExactCode() {
        for (text, code, keepsID) in invalidTable {
            switch decode(text) {
            case .success(let envelope):
                XCTFail("\(text) decoded as \(envelope.request)")
            case .failure(let failure):
                XCTAssertEqual(failure.error.code, code, "\(text): \(failure.error.message)")
                XCTAssertEqual(failure.id != nil, keepsID, "id kept for \(text)")
                XCTAssertFalse(failure.error.message.isEmpty, text)
            }
        }
    }

    func testDecode_limitsAtTheBoundary_areAccepted() {
        let event = String(repeating: "e", count: 128)
        let key = String(repeating: "k", count: 128)
        let value = String(repeating: "v", count: 4096)
        XCTAssertNoThrow(try decode(#"{"op":"magix","id":1,"room":"r","event":"\#(event)"}"#).get())
        XCTAssertNoThrow(try decode(#"{"op":"setExtraInfo","id":1,"room":"r","key":"\#(key)","value":"\#(value)"}"#).get())
        let room = String(repeating: "r", count: 128)
        XCTAssertNoThrow(try decode(#"{"op":"logout","id":1,"room":"\#(room)"}"#).get())
        XCTAssertThrowsError(try decode(#"{"op":"logout","id":1,"room":"\#(room)r"}"#).get())
    }

    func testDecodeFailure_keepsValidRoomAndOp() {
        guard case .failure(let failure) = decode(#"{"op":"setWritable","id":4,"room":"r9"}"#) else {
            return XCTFail("expected failure")
        }
        XCTAssertEqual(failure.op, "setWritable")
        XCTAssertEqual(failure.id, 4)
        XCTAssertEqual(failure.room, "r9")
        guard case .failure(let bad) = decode(#"{"op":"logout","id":1,"room":"bad room"}"#) else {
            return XCTFail("expected failure")
        }
        XCTAssertNil(bad.room)
    }

    func testDecodeFailure_response_isReplyWithIdElseErrorPush() {
        let withID = DecodeFailure(op: "fly", id: 9, error: ProtocolError(code: .unknownOp, message: "unknown op"))
        XCTAssertEqual(withID.response, parsed(#"{"op":"reply","id":9,"ok":false,"code":1009002,"message":"unknown op"}"#))
        let withoutID = DecodeFailure(room: "r", error: .malformed("missing id"))
        XCTAssertEqual(withoutID.response, parsed(#"{"op":"error","code":1009001,"message":"missing id","room":"r"}"#))
    }

    func testClientOp_classification() {
        XCTAssertFalse(ClientOp.ping.isRequest)
        XCTAssertTrue(ClientOp.hello.isRequest)
        XCTAssertFalse(ClientOp.hello.isRoomScoped)
        XCTAssertTrue(ClientOp.logout.isRoomScoped)
        let writers = ClientOp.allCases.filter(\.requiresWritable).map(\.rawValue)
        XCTAssertEqual(
            Set(writers),
            ["setState", "magix", "putScenes", "setScenePath", "removeScenes", "insertImage", "setViewMode"])
    }

    func testDecode_randomMutationsOfValidMessages_neverCrash() {
        var rng = SeededGenerator(seed: 0xDEC0DE)
        let seeds = invalidTable.map(\.0) + [#"{"op":"putScenes","id":7,"room":"r1","dir":"/d","scenes":[{"name":"p1"}]}"#]
        let alphabet = Array(#"{}[]:,"0123456789-/.eaz "#.utf8)
        var exercised = 0
        for _ in 0..<4000 {
            var bytes = Array((seeds.randomElement(using: &rng) ?? "{}").utf8)
            let position = Int.random(in: 0..<bytes.count, using: &rng)
            bytes[position] = alphabet.randomElement(using: &rng) ?? 0x20
            guard let json = try? JSON.parse(bytes) else { continue }
            exercised += 1
            if case .failure(let failure) = ClientEnvelope.decode(json) {
                XCTAssertTrue(failure.error.code == .malformed || failure.error.code == .invalidArgument
                    || failure.error.code == .unknownOp)
            }
        }
        XCTAssertGreaterThan(exercised, 1000)
    }
}
