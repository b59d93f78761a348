import Foundation

extension BotConfig {
    /// The fields of this config file that hold a secret (`auth.secret`,
    /// `auth.tokens`, `controlToken`, `serviceToken`, a password in
    /// `fleet.redis`), in the file's own spelling.
    var secretFields: [String] {
        var fields: [String] = []
        switch auth {
        case .secret: fields.append("auth.secret")
        case .tokens: fields.append("auth.tokens")
        case .tokenFile: break
        }
        if controlToken != nil { fields.append("controlToken") }
        if serviceToken != nil { fields.append("serviceToken") }
        if fleet?.passwordSource == "fleet.redis" { fields.append("fleet.redis") }
        return fields
    }

    /// A warning when the config file holds a secret and its group or others
    /// may read it (mode & 0o077 on a file with `secretFields`); nil
    /// otherwise, or when the file cannot be examined. roombot logs it once at start.
    public var permissionWarning: String? {
        let fields = secretFields
        guard !fields.isEmpty, let attributes = try? FileManager.default.attributesOfItem(atPath: path),
              let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue, mode & 0o077 != 0 else { return nil }
        let readers = [mode & 0o040 != 0 ? "its group" : nil, mode & 0o004 != 0 ? "everyone" : nil].compactMap { $0 }
        let who = readers.isEmpty ? "others than its owner may access it" : readers.joined(separator: " and ") + " can read it"
        return "\(path) holds a secret (\(fields.joined(separator: ", "))) and \(who) (mode \(String(mode & 0o777, radix: 8))): "
            + "chmod 600 \(path), or move the secret to a file or an environment variable (docs/SECURITY.md)"
    }
}
