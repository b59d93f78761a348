import Foundation

/// systemd's readiness protocol (`sd_notify(3)`), without libsystemd: one
/// datagram per state change to the unix socket named by `$NOTIFY_SOCKET`
/// (a path, or `@name` in the abstract namespace). A unit with
/// `Type=notify` counts as started at `READY=1` and as stopping at
/// `STOPPING=1`. Without `$NOTIFY_SOCKET` (not under systemd) every call
/// does nothing. Safe from any thread.
public struct SystemdNotifier: Sendable {
    /// The socket address from the environment, if any.
    public let socketPath: String?

    /// Reads `NOTIFY_SOCKET` from `environment`.
    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        let path = environment["NOTIFY_SOCKET"] ?? ""
        socketPath = path.isEmpty ? nil : path
    }

    /// The service is up: `READY=1` plus a human-readable `STATUS=`.
    @discardableResult
    public func ready(status: String? = nil) -> Bool {
        send("READY=1" + (status.map { "\nSTATUS=\($0)" } ?? ""))
    }

    /// The service is shutting down.
    @discardableResult
    public func stopping() -> Bool { send("STOPPING=1") }

    /// Sends `state` (newline-separated `KEY=value` assignments) as one
    /// datagram; false when there is no socket or the send failed.
    @discardableResult
    public func send(_ state: String) -> Bool {
        guard let socketPath else { return false }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(socketPath.utf8)
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }  // abstract namespace
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity, bytes.first == 0 || bytes.first == UInt8(ascii: "/") else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { path in
            path.copyBytes(from: bytes)
        }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + bytes.count + (bytes.first == 0 ? 0 : 1))
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let message = Array(state.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                message.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), socketAddress, length) }
            }
        }
        return sent == message.count
    }
}
