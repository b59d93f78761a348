import Dispatch
import Foundation
import RoomKitLoop
import RoomKitTestSupport
import XCTest

/// Runs `body` on the loop thread and waits for its result.
func onLoop<T>(_ loop: EventLoop, _ body: @escaping () throws -> T) throws -> T {
    try loop.runAndWait(body)
}

/// Polls `condition` (evaluated on the loop) until true or the deadline passes.
func waitUntil(_ loop: EventLoop, timeout: TimeInterval = 10, file: StaticString = #filePath, line: UInt = #line,
               _ condition: @escaping () -> Bool) {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if (try? onLoop(loop, condition)) == true { return }
        usleep(2_000)
    }
    XCTFail("condition not met within \(timeout) s", file: file, line: line)
}

/// A server delegate that echoes every WebSocket message and answers HTTP.
final class EchoServer: WebServerDelegate, WebSocketDelegate, @unchecked Sendable {
    // @unchecked Sendable: loop thread only.
    var accepted: [WebSocketConnection] = []
    var closes: [WebSocketCloseEvent] = []
    var requests: [HTTPRequest] = []

    func webServer(_ server: WebServer, didAccept connection: WebSocketConnection) {
        accepted.append(connection)
        connection.delegate = self
    }

    func webSocket(_ connection: WebSocketConnection, didReceive message: WebSocketMessage) {
        connection.send(WebSocketFrame(bytes: message.bytes, isBinary: message.isBinary))
    }

    func webSocket(_ connection: WebSocketConnection, didCloseWith event: WebSocketCloseEvent) {
        closes.append(event)
    }

    func webServer(_ server: WebServer, didReceive request: HTTPRequest, responder: HTTPResponder) {
        requests.append(request)
        switch (request.method, request.path) {
        case ("GET", "/healthz"):
            responder.respond(status: 200, contentType: "text/plain", text: "ok")
        case ("POST", "/echo"):
            responder.respond(HTTPResponse(status: 200, contentType: "application/octet-stream",
                                           headers: [("X-Query", request.query)], body: request.body))
        case ("GET", "/query"):
            // Each named argument as `queryValue` decodes it, one per line ("-" when absent).
            let names = ["x", "y", "z", "a b"]
            responder.respond(status: 200, contentType: "text/plain",
                              text: names.map { request.queryValue($0) ?? "-" }.joined(separator: "\n"))
        case ("GET", "/later"):
            // Answered after a delay, from another thread.
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) {
                responder.respond(status: 202, text: "{\"later\":true}")
            }
        default:
            responder.respond(status: 404, text: "{\"code\":404}")
        }
    }
}

/// A client delegate that records what happens.
final class RecordingClient: WebSocketDelegate, @unchecked Sendable {
    // @unchecked Sendable: loop thread only.
    var opened = false
    var messages: [WebSocketMessage] = []
    var closeEvent: WebSocketCloseEvent?

    func webSocketDidOpen(_ connection: WebSocketConnection) { opened = true }
    func webSocket(_ connection: WebSocketConnection, didReceive message: WebSocketMessage) {
        messages.append(message)
    }
    func webSocket(_ connection: WebSocketConnection, didCloseWith event: WebSocketCloseEvent) {
        closeEvent = event
    }
}


/// A TCP listener on 127.0.0.1 that misbehaves: it accepts and then either
/// resets the connection at once or holds it silently. Runs on its own thread.
final class MisbehavingListener: @unchecked Sendable {
    enum Mode { case resetOnAccept, blackhole }
    let fd: Int32
    let port: Int
    private let held = HeldSockets()

    final class HeldSockets: @unchecked Sendable {
        // @unchecked Sendable: guarded by lock.
        let lock = NSLock()
        var fds: [Int32] = []
    }

    init(mode: Mode) {
        (fd, port) = listenLoopback()
        let listenFD = fd
        let held = self.held
        Thread.detachNewThread {
            while true {
                let client = accept(listenFD, nil, nil)
                if client < 0 { return }
                switch mode {
                case .resetOnAccept:
                    var linger = Foundation.linger(l_onoff: 1, l_linger: 0)
                    setsockopt(client, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Foundation.linger>.size))
                    close(client)
                case .blackhole:
                    held.lock.lock(); held.fds.append(client); held.lock.unlock()
                }
            }
        }
    }

    func stop() {
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
        held.lock.lock(); held.fds.forEach { close($0) }; held.fds.removeAll(); held.lock.unlock()
    }
}

/// A fresh closed port: bind, read the port, close.
func closedPort() -> Int {
    freePort()
}
