import Foundation
import RoomKitProtocol
import XCTest

/// An HTTP answer as a test sees it.
struct HTTPReply {
    var status: Int
    /// Header names lowercased.
    var headers: [String: String]
    var body: [UInt8]

    var text: String { String(decoding: body, as: UTF8.self) }
    var json: JSON? { try? JSON.parse(body) }
    /// The body's lines (NDJSON), each parsed; `nil` for a line that is not JSON.
    var lines: [JSON?] {
        text.split(separator: "\n", omittingEmptySubsequences: true).map { try? JSON.parse(String($0)) }
    }
}

/// Sends one HTTP/1.1 request over a fresh TCP connection to 127.0.0.1 and
/// reads the answer (by Content-Length, or to EOF). A test-side probe only.
func httpRequest(port: Int, method: String, path: String, headers: [(String, String)] = [], body: String? = nil,
                 timeout: TimeInterval = 5, file: StaticString = #filePath, line: UInt = #line) throws -> HTTPReply {
    var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
    for (name, value) in headers { head += "\(name): \(value)\r\n" }
    let payload = Array((body ?? "").utf8)
    if body != nil || method == "POST" {
        head += "Content-Type: application/json\r\nContent-Length: \(payload.count)\r\n"
    }
    head += "\r\n"
    let raw = rawTCPExchange(port: port, Array(head.utf8) + payload, timeout: timeout)
    guard let reply = parseHTTPReply(raw) else {
        XCTFail("no HTTP answer to \(method) \(path): \(String(decoding: raw, as: UTF8.self).prefix(200))",
                file: file, line: line)
        throw TestTimeout(description: "no HTTP answer")
    }
    return reply
}

/// Parses a whole HTTP/1.1 response (Content-Length or EOF-delimited body).
func parseHTTPReply(_ raw: [UInt8]) -> HTTPReply? {
    let separator: [UInt8] = [13, 10, 13, 10]
    guard let end = raw.indices.first(where: { raw[$0...].starts(with: separator) }) else { return nil }
    let head = String(decoding: raw[..<end], as: UTF8.self).components(separatedBy: "\r\n")
    let statusParts = head.first?.split(separator: " ") ?? []
    guard statusParts.count >= 2, let status = Int(statusParts[1]) else { return nil }
    var headers: [String: String] = [:]
    for field in head.dropFirst() {
        guard let colon = field.firstIndex(of: ":") else { continue }
        headers[field[..<colon].lowercased()] = field[field.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
    var body = Array(raw[(end + 4)...])
    if let length = headers["content-length"].flatMap(Int.init), body.count > length {
        body = Array(body.prefix(length))
    }
    return HTTPReply(status: status, headers: headers, body: body)
}

/// Sends `bytes` over TCP to 127.0.0.1:`port` and reads until the peer
/// closes, a complete Content-Length body arrived, or `timeout`.
func rawTCPExchange(port: Int, _ bytes: [UInt8], timeout: TimeInterval = 5) -> [UInt8] {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return [] }
    defer { close(fd) }
    var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1_000_000))
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard connected == 0 else { return [] }
    var sent = 0
    while sent < bytes.count {
        let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if n <= 0 { return [] }
        sent += n
    }
    var response = [UInt8]()
    var buffer = [UInt8](repeating: 0, count: 65536)
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        let n = recv(fd, &buffer, buffer.count, 0)
        if n <= 0 { break }
        response.append(contentsOf: buffer[0..<n])
        if let reply = parseHTTPReply(response), let length = reply.headers["content-length"].flatMap(Int.init),
           reply.body.count >= length {
            break
        }
    }
    return response
}
