import Foundation

/// The resident set of a process (VmRSS in /proc/<pid>/status) in KiB, or 0
/// when it cannot be read. `pid` nil means this process.
public func residentKiB(pid: Int32? = nil) -> Int {
    let path = "/proc/\(pid.map(String.init) ?? "self")/status"
    guard let status = procText(path) else { return 0 }
    let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
    return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
}

/// How many file descriptors this process has open.
public func openDescriptorCount() -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
}

/// A /proc file's text. These report a size of 0, which Foundation's file
/// reader on Linux handles by leaking a buffer (see `fileText`), so read()
/// them directly.
func procText(_ path: String) -> String? {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = read(fd, &buffer, buffer.count)
        if n <= 0 { break }
        bytes.append(contentsOf: buffer[0..<n])
    }
    return String(decoding: bytes, as: UTF8.self)
}
