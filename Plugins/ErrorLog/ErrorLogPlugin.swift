import Foundation
import RoomKitPluginSDK
import RoomKitProtocol

/// `error-log`: writes every `throwError` report as one JSON line, to
/// `config.file` when given (appending), else to the host's log.
final class ErrorLogPlugin: RoomKitPlugin {
    private var file: FileHandle?

    init() {}

    func load(host: PluginHost, config: JSON) throws {
        if let path = config["file"]?.stringValue {
            if !FileManager.default.fileExists(atPath: path) {
                _ = FileManager.default.createFile(atPath: path, contents: nil)
            }
            guard let handle = FileHandle(forWritingAtPath: path) else {
                throw LogFileError(path: path)
            }
            handle.seekToEndOfFile()
            file = handle
        }
    }

    func unload() {
        try? file?.close()
        file = nil
    }

    func throwError(domain: String, code: Int64, message: String) {
        let line = JSON.object([
            "ts": .int(Int64(Date().timeIntervalSince1970 * 1000)), "domain": .string(domain),
            "code": .int(code), "message": .string(message),
        ]).jsonString
        if let file {
            file.write(Data((line + "\n").utf8))
        } else {
            log.error(line)
        }
    }
}

struct LogFileError: Error, CustomStringConvertible {
    let path: String
    var description: String { "cannot open \(path) for appending" }
}

@_cdecl("roomkit_plugin_entry")
public func roomkitPluginEntry(_ major: UInt16, _ minor: UInt16) -> UnsafeRawPointer? { exportPlugin(ErrorLogPlugin.self, major, minor) }
