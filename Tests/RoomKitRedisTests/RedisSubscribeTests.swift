import Foundation
import Logging
import RoomKitLoop
import RoomKitRedis
import RoomKitTestSupport
import XCTest

/// `RedisClient.subscribe` against a real redis-server: the confirmation,
/// then every published message once, in order.
final class RedisSubscribeTests: XCTestCase {
    func testSubscribe_receivesEachPublishedMessageOnce_inOrder() throws {
        let redis = RedisProcess()
        try redis.start()
        defer { redis.kill9() }
        let loop = try EventLoop(name: "redis-subscribe-test")
        let endpoint = try XCTUnwrap(RedisEndpoint(url: redis.url))
        let (subscriber, publisher) = try loop.runAndWait { () -> (RedisClient, RedisClient) in
            let make = {
                let client = RedisClient(loop: loop, endpoint: endpoint, logger: Logger(label: "redis-subscribe-test"))
                try client.start()
                return client
            }
            return (try make(), try make())
        }
        let deadline = Date().addingTimeInterval(5)
        while try !loop.runAndWait({ subscriber.isConnected && publisher.isConnected }), Date() < deadline { usleep(10_000) }
        let received = LockedValue<[[String]]>([])
        XCTAssertTrue(try loop.runAndWait {
            subscriber.subscribe(["room-0"]) { value in
                received.withLock { $0.append(value.array.map { $0.string ?? "\($0)" }) }
            }
        })
        await_(received, count: 1)
        for payload in ["one", "two", "three"] {
            let done = DispatchSemaphore(value: 0)
            _ = loop.execute { publisher.command(["PUBLISH", "room-0", payload]) { _ in done.signal() } }
            XCTAssertEqual(done.wait(timeout: .now() + 5), .success)
        }
        await_(received, count: 4)
        let messages = received.withLock { $0 }
        XCTAssertEqual(messages.first?.first, "subscribe")
        XCTAssertEqual(Array(messages.dropFirst()), [["message", "room-0", "one"], ["message", "room-0", "two"],
                                                      ["message", "room-0", "three"]])
        try loop.runAndWait {
            subscriber.close()
            publisher.close()
        }
        try loop.shutdown()
    }

    private func await_(_ received: LockedValue<[[String]]>, count: Int) {
        let deadline = Date().addingTimeInterval(5)
        while received.withLock({ $0.count }) < count, Date() < deadline { usleep(10_000) }
    }
}
