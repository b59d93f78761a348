import Foundation

/// Whether a TCP address can be listened on right now.
///
/// libwebsockets, told to listen on an address it cannot bind, fails after
/// it has already put handles on the loop that it then cannot close cleanly
/// (the process crashes at shutdown). Servers check first and turn the
/// problem into a clear error. The check and the real bind are two steps, so
/// a port taken in between still reaches libwebsockets.
public enum BindCheck {
    /// The numeric address (`127.0.0.1`, `::1`) that `host` names: a host
    /// name (`localhost`) or a short numeric form (`127.1`) resolved with
    /// getaddrinfo, brackets around an IPv6 address removed; nil when it
    /// does not resolve. libwebsockets takes a numeric address or an
    /// interface name only: given `localhost` it logs "iface ... DOESN'T
    /// EXIST" and the process then crashes (issue #27 §2), so every listener
    /// hands it the resolved form.
    public static func numericAddress(host: String) -> String? {
        let name = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE
        var found: UnsafeMutablePointer<addrinfo>?
        guard !name.isEmpty, getaddrinfo(name, nil, &hints, &found) == 0, let address = found else { return nil }
        defer { freeaddrinfo(found) }
        var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        guard getnameinfo(address.pointee.ai_addr, address.pointee.ai_addrlen, &text, socklen_t(text.count),
                          nil, 0, NI_NUMERICHOST) == 0 else { return nil }
        let bytes = text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// nil when `host:port` can be bound now, else why not, in one line
    /// (`cannot listen on 127.0.0.1:7800: Address already in use`).
    public static func problem(host: String, port: Int) -> String? {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        var found: UnsafeMutablePointer<addrinfo>?
        let name = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        guard getaddrinfo(name, String(port), &hints, &found) == 0, let address = found else {
            return "cannot resolve host '\(host)'"
        }
        defer { freeaddrinfo(found) }
        let fd = socket(address.pointee.ai_family, address.pointee.ai_socktype, address.pointee.ai_protocol)
        guard fd >= 0 else { return "cannot open a socket: \(String(cString: strerror(errno)))" }
        defer { close(fd) }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        guard bind(fd, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0 else {
            return "cannot listen on \(host):\(port): \(String(cString: strerror(errno)))"
        }
        return nil
    }
}
