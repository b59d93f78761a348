import Foundation

/// `127.0.0.1:port` as a sockaddr_in.
public func loopbackAddress(port: Int) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return address
}

/// A TCP socket connected to 127.0.0.1:port, or nil.
public func connectLoopback(port: Int, receiveTimeout: TimeInterval = 5) -> Int32? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    var tv = timeval(tv_sec: Int(receiveTimeout), tv_usec: Int((receiveTimeout.truncatingRemainder(dividingBy: 1)) * 1_000_000))
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    var address = loopbackAddress(port: port)
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    // Interrupted by a signal, the connection goes on in the background: wait for it.
    guard connected == 0 || (errno == EINTR && waitConnected(fd)) else {
        close(fd)
        return nil
    }
    return fd
}

/// After an interrupted `connect`: waits (up to 5 s) until `fd` is writable
/// and reports whether the connection was made.
private func waitConnected(_ fd: Int32) -> Bool {
    var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
    while true {
        let n = poll(&poller, 1, 5000)
        if n < 0 && errno == EINTR { continue }
        guard n > 0 else { return false }
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
        return error == 0
    }
}

/// A TCP socket listening on 127.0.0.1 on a free port (SO_REUSEADDR), and that port.
public func listenLoopback(backlog: Int32 = 16) -> (fd: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var yes: Int32 = 1
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
    var address = loopbackAddress(port: 0)
    _ = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    listen(fd, backlog)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

/// A port that was free a moment ago: listen on one, read it, close.
public func freePort() -> Int {
    let (fd, port) = listenLoopback()
    close(fd)
    return port
}

/// Sends `request` as-is over TCP and reads until the peer closes or the
/// receive timeout. A test-side probe only: the product never hand-parses HTTP.
public func rawExchange(port: Int, _ request: String, timeout: TimeInterval = 5) -> String {
    guard let fd = connectLoopback(port: port, receiveTimeout: timeout) else { return "" }
    defer { close(fd) }
    _ = request.withCString { send(fd, $0, strlen($0), 0) }
    var response = [UInt8]()
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = recv(fd, &buffer, buffer.count, 0)
        // A signal (a child process of another test exiting: SIGCHLD) interrupts
        // the read; that is not the end of the answer.
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { break }
        response.append(contentsOf: buffer[0..<n])
    }
    return String(decoding: response, as: UTF8.self)
}

/// One HTTP/1.1 request with a JSON body; returns the whole response text.
/// `host` is the `Host` header's value.
public func httpRequest(port: Int, _ method: String, _ path: String, token: String? = nil, body: String = "",
                        headers: [String] = [], host: String = "127.0.0.1") -> String {
    var request = "\(method) \(path) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n"
    if let token { request += "Authorization: Bearer \(token)\r\n" }
    for header in headers { request += header + "\r\n" }
    request += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
    return rawExchange(port: port, request)
}

/// One HTTP/1.1 request; returns the status and the body.
public func http(_ port: Int, _ method: String, _ path: String, _ body: String = "", headers: [String] = []) -> (Int, String) {
    let text = httpRequest(port: port, method, path, body: body, headers: headers)
    let status = Int(text.split(separator: " ").dropFirst().first ?? "") ?? 0
    let payload = text.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
    return (status, payload)
}
