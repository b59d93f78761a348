import Foundation
import RoomKitLoop
import RoomKitProtocol
import XCTest

/// Batched messages (docs/PROTOCOL.md, Part 2, "Batched messages"), against
/// a `roomd` child: a client that asks and one that does not, in the same
/// room, see the same pushes in the same order; the one that asked gets
/// them in fewer WebSocket messages, the other one message per push.
final class BatchTests: ServerTestCase {
    /// roomd with a request bucket large enough for the bursts below.
    private func startBatchRoomd(extra: [String] = []) throws -> (RoomdProcess, ClientSide) {
        let roomd = try startRoomd(dataDirectory: try temporaryDirectory(),
                                   extra: ["--rate-limit", "100000", "--rate-limit-burst", "100000"] + extra)
        return (roomd, try makeClientSide())
    }

    /// Connects a raw client, says hello (asking for batches or not) and logs in.
    private func member(_ side: ClientSide, port: Int, room: String, user: String, batched: Bool) throws -> (RawClient, JSON) {
        let client = try side.connect(port: port, hello: false)
        let hello = batched ? try client.helloBatched() : try client.hello()
        XCTAssertEqual(hello["batch"], batched ? true : nil, "the hello reply confirms batching only when asked: \(hello)")
        let login = try client.login(room, token: makeToken(user: user, room: room), user: user)
        XCTAssertEqual(login["ok"], true, "login of \(user): \(login)")
        return (client, login)
    }

    /// Waits until each of `clients` has seen `user` join, then drops what they read so far.
    private func settle(_ clients: [RawClient], joined user: String) throws {
        for client in clients {
            try client.waitFor("userUpdate") { $0.array("users").contains { $0["userId"] == .string(user) } }
            _ = try client.drain()
        }
    }

    /// `count` magix requests of `sender` into `room`, as texts (ids from `firstID`).
    private func magixBurst(room: String, firstID: Int64, count: Int, padding: Int = 0) -> [String] {
        let pad = String(repeating: "x", count: padding)
        return (0..<count).map { index in
            JSON.object(["op": "magix", "id": .int(firstID + Int64(index)), "room": .string(room), "event": "tick",
                         "payload": ["n": .int(Int64(index)), "pad": .string(pad)]]).jsonString
        }
    }

    func testBatchingAndPlainMembers_inOneRoom_receiveTheSamePushesInTheSameOrder() throws {
        let (roomd, side) = try startBatchRoomd()
        let room = "batch-room"
        let (batched, _) = try member(side, port: roomd.port, room: room, user: "batched", batched: true)
        let (plain, _) = try member(side, port: roomd.port, room: room, user: "plain", batched: false)
        let (sender, _) = try member(side, port: roomd.port, room: room, user: "sender", batched: false)
        try settle([batched, plain], joined: "sender")
        let batchedBefore = try batched.webSocketMessages().count
        let plainBefore = try plain.webSocketMessages().count

        let count = 300
        let firstID = try sender.reserveIDs(count)
        try sender.sendBurst(magixBurst(room: room, firstID: firstID, count: count))
        let fromBatched = try batched.waitForPushes(count, room: room)
        let fromPlain = try plain.waitForPushes(count, room: room)

        // The same pushes, in the same order, decoded.
        XCTAssertEqual(fromBatched, fromPlain)
        XCTAssertEqual(fromPlain.map { $0.int("seq") ?? -1 }, fromPlain.indices.map { Int64($0) + fromPlain[0].int("seq")! },
                       "consecutive seqs, in order")
        XCTAssertEqual(fromPlain.map { $0["payload"]?["n"]?.int64Value ?? -1 }, (0..<Int64(count)).map { $0 })

        // The plain member: one WebSocket message per push, each exactly one
        // compact JSON object (today's bytes: no separator, the push as encoded).
        let plainMessages = try Array(plain.webSocketMessages().dropFirst(plainBefore))
        XCTAssertEqual(plainMessages.count, count, "one message per push for a client that did not ask")
        XCTAssertFalse(plainMessages.contains { $0.contains(MessageBatch.separator) })
        XCTAssertEqual(plainMessages.map { try? JSON.parse($0) }, fromPlain.map { Optional($0) })

        // The batching member: fewer messages, whose elements are, byte for
        // byte, the plain member's messages in order.
        let batchedMessages = try Array(batched.webSocketMessages().dropFirst(batchedBefore))
        XCTAssertLessThan(batchedMessages.count, count, "a burst of \(count) pushes comes in fewer messages when batched")
        var elements: [[UInt8]] = []
        for message in batchedMessages {
            MessageBatch.forEachMessage(in: message) { elements.append(Array($0)) }
        }
        XCTAssertEqual(elements, plainMessages, "the batch's elements are the pushes as the plain member got them")
        try sender.close()
    }

    func testRepliesToABurst_areBatched_eachOnceAndInOrder() throws {
        let (roomd, side) = try startBatchRoomd()
        let room = "batch-replies"
        let (sender, _) = try member(side, port: roomd.port, room: room, user: "sender", batched: true)
        let before = try sender.webSocketMessages().count
        let count = 200
        let firstID = try sender.reserveIDs(count)
        try sender.sendBurst(magixBurst(room: room, firstID: firstID, count: count))
        var seqs: [Int64] = []
        for id in firstID..<(firstID + Int64(count)) {
            let reply = try sender.reply(to: id)
            XCTAssertEqual(reply["ok"], true, "\(reply)")
            seqs.append(reply.int("seq") ?? -1)
        }
        XCTAssertEqual(seqs, seqs.sorted(), "replies in request order")
        let messages = try Array(sender.webSocketMessages().dropFirst(before))
        XCTAssertLessThan(messages.count, count, "replies share batches")
        let history = try sender.history()
        let replies = history.filter { $0.op == "reply" && ($0.int("id") ?? 0) >= firstID }
        XCTAssertEqual(replies.map { $0.int("id") ?? 0 }, Array(firstID..<(firstID + Int64(count))),
                       "every request answered once, in order")
    }

    func testBatch_isCutAtTheAdvertisedMaxMessageBytes() throws {
        let limit = 16_384
        let (roomd, side) = try startBatchRoomd(extra: ["--max-message-bytes", "\(limit)"])
        let room = "batch-cut"
        let (batched, _) = try member(side, port: roomd.port, room: room, user: "batched", batched: true)
        let (sender, _) = try member(side, port: roomd.port, room: room, user: "sender", batched: false)
        try settle([batched], joined: "sender")
        let before = try batched.webSocketMessages().count
        let count = 60
        let firstID = try sender.reserveIDs(count)
        // ~3 KB pushes: at most five fit in one message of 16 KiB.
        try sender.sendBurst(magixBurst(room: room, firstID: firstID, count: count, padding: 3_000))
        let pushes = try batched.waitForPushes(count, room: room)
        XCTAssertEqual(pushes.map { $0["payload"]?["n"]?.int64Value ?? -1 }, (0..<Int64(count)).map { $0 })
        let messages = try Array(batched.webSocketMessages().dropFirst(before))
        XCTAssertTrue(messages.allSatisfy { $0.count <= limit }, "no batch over \(limit) bytes: \(messages.map(\.count))")
        var elementsPerMessage: [Int] = []
        for message in messages {
            var elements = 0
            MessageBatch.forEachMessage(in: message) { _ in elements += 1 }
            elementsPerMessage.append(elements)
        }
        XCTAssertEqual(elementsPerMessage.reduce(0, +), count)
        XCTAssertGreaterThan(elementsPerMessage.max() ?? 0, 1, "the burst was batched: \(elementsPerMessage)")
        XCTAssertLessThanOrEqual(elementsPerMessage.max() ?? 0, 5, "a 16 KiB batch holds at most five 3 KB pushes")

        // A message larger than the limit by itself (a login reply carrying
        // a big room state) goes alone; what follows it in the same turn
        // goes in the next message.
        for key in 0..<6 {
            try sender.ok("setState", room: room, ["patch": ["globalState": [
                "k\(key)": .string(String(repeating: "s", count: 3_000))]]])
        }
        let late = try side.connect(port: roomd.port, hello: false)
        try late.helloBatched()
        let lateBefore = try late.webSocketMessages().count
        let small = room + "-small"
        try late.sendBurst([
            JSON.object(["op": "login", "id": 2, "room": .string(room), "token": .string(makeToken(user: "late", room: room)),
                         "user": ["id": "late"]]).jsonString,
            JSON.object(["op": "login", "id": 3, "room": .string(small), "token": .string(makeToken(user: "late", room: small)),
                         "user": ["id": "late"]]).jsonString,
        ])
        XCTAssertEqual(try late.reply(to: 2)["ok"], true)
        XCTAssertEqual(try late.reply(to: 3)["ok"], true)
        let lateMessages = try Array(late.webSocketMessages().dropFirst(lateBefore))
        let big = try XCTUnwrap(lateMessages.first { $0.count > limit }, "the big login reply: \(lateMessages.map(\.count))")
        XCTAssertFalse(big.contains(MessageBatch.separator), "a message over the limit goes alone")
        XCTAssertEqual(try JSON.parse(big).int("id"), 2)
    }

    func testHelloReply_comesAlone_andBatchingStartsAfterIt() throws {
        let (roomd, side) = try startBatchRoomd()
        let room = "batch-hello"
        let client = try side.connect(port: roomd.port, hello: false)
        try client.expectBatches()
        // hello and two logins in one burst: roomd reads them together.
        let token = makeToken(user: "u1", room: room)
        let other = makeToken(user: "u1", room: room + "-2")
        try client.sendBurst([
            #"{"op":"hello","id":1,"client":"t","batch":true}"#,
            JSON.object(["op": "login", "id": 2, "room": .string(room), "token": .string(token), "user": ["id": "u1"]]).jsonString,
            JSON.object(["op": "login", "id": 3, "room": .string(room + "-2"), "token": .string(other),
                         "user": ["id": "u1"]]).jsonString,
        ])
        XCTAssertEqual(try client.reply(to: 1)["batch"], true)
        XCTAssertEqual(try client.reply(to: 2)["ok"], true)
        XCTAssertEqual(try client.reply(to: 3)["ok"], true)
        let messages = try client.webSocketMessages()
        XCTAssertFalse(messages[0].contains(MessageBatch.separator), "the hello reply is a message of its own")
        XCTAssertEqual(try JSON.parse(messages[0]).int("id"), 1)
        var elements = 0
        for message in messages { MessageBatch.forEachMessage(in: message) { _ in elements += 1 } }
        XCTAssertEqual(elements, 3, "three replies, each once")
    }

    func testHelloBatchField_mustBeABoolean_andBatchingIsOffUnlessAsked() throws {
        let (roomd, side) = try startBatchRoomd()
        let plain = try side.connect(port: roomd.port, hello: false)
        let reply = try plain.hello()
        XCTAssertNil(reply["batch"], "a client that did not ask sees today's hello reply")
        let off = try side.connect(port: roomd.port, hello: false)
        XCTAssertNil(try off.ok("hello", ["batch": false])["batch"])
        let wrong = try side.connect(port: roomd.port, hello: false)
        // A field of the wrong type is malformed (§2, 1009001), and a
        // malformed message before a successful hello closes 1002 (§4.1).
        try wrong.sendRequest("hello", ["batch": "yes"])
        XCTAssertEqual(try wrong.waitForClose(), 1002, "batch of the wrong type")
    }

    func testResumeReplay_comesBatched_afterItsReply() throws {
        let (roomd, side) = try startBatchRoomd()
        let room = "batch-resume"
        let (batched, login) = try member(side, port: roomd.port, room: room, user: "batched", batched: true)
        let (sender, joined) = try member(side, port: roomd.port, room: room, user: "sender", batched: false)
        try settle([batched], joined: "sender")
        let session = try XCTUnwrap(login.string("session"))
        // Resume from the sender's join, which the member has seen.
        let seq = try XCTUnwrap(joined.int("seq"))
        try batched.abort()
        let count = 100
        let firstID = try sender.reserveIDs(count)
        try sender.sendBurst(magixBurst(room: room, firstID: firstID, count: count))
        _ = try sender.reply(to: firstID + Int64(count) - 1)

        let again = try side.connect(port: roomd.port, hello: false)
        try again.helloBatched()
        let before = try again.webSocketMessages().count
        let reply = try again.login(room, token: makeToken(user: "batched", room: room), user: "batched",
                                    resume: (session, seq))
        XCTAssertEqual(reply["recovered"], true, "\(reply)")
        let replayed = try again.waitForPushes(count, room: room)
        XCTAssertEqual(replayed.map { $0.int("seq") ?? -1 }, (1...Int64(count)).map { seq + $0 }, "the replay, in order")
        let messages = try Array(again.webSocketMessages().dropFirst(before))
        XCTAssertLessThan(messages.count, count + 1, "the reply and its replay share batches")
        var order: [JSON] = []
        for message in messages { MessageBatch.forEachMessage(in: message) { order.append((try? JSON.parse($0)) ?? .null) } }
        XCTAssertEqual(order.first?.op, "reply", "the reply comes before its replay")
        XCTAssertEqual(order.count, count + 1)
    }

    func testSlowBatchingConsumer_overTheOutboundLimit_isClosed1013_likeAPlainOne() throws {
        // LimitTests' slow consumer, asking for batches: the bytes a turn
        // holds for a batch count against the same outbound limit.
        let server = try startServer { $0.maxOutboundBytes = 4096 }
        let slow = try WireSocket(port: server.port)
        slow.sendText(#"{"op":"hello","id":1,"batch":true}"#)
        XCTAssertTrue(slow.readText()?.contains(#""batch":true"#) ?? false)
        slow.sendText(#"{"op":"login","id":2,"room":"r1","token":"\#(makeToken(user: "u1"))","user":{"id":"u1"}}"#)
        XCTAssertTrue(slow.readText()?.contains(#""session""#) ?? false)
        let (writer, _) = try server.join("r1", user: "u2")
        try writer.ok("setState", room: "r1", ["patch": ["globalState": ["big": .string(String(repeating: "z", count: 6000))]]])
        let (code, texts, _) = slow.readUntilClose()
        XCTAssertEqual(code, 1013)
        XCTAssertFalse(texts.contains { $0.contains("zzzz") }, "the held push was dropped with the batch, not sent")
    }
}
