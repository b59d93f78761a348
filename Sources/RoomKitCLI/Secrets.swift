import Foundation

/// A command-line option that cannot be used, e.g. `--secret-file: cannot read /etc/roomd/secret`.
public struct OptionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The flag (or environment variable) at fault.
    public let flag: String
    /// What is wrong with it.
    public let problem: String
    /// Makes the error for `flag` (a flag or an environment variable).
    public init(flag: String, problem: String) {
        self.flag = flag
        self.problem = problem
    }
    /// One line: `--flag: problem`.
    public var description: String { "\(flag): \(problem)" }
}

/// Where a secret may come from, besides the command line, where `ps` shows
/// it to every user of the machine: a file (`--secret-file`, for systemd's
/// `LoadCredential=` and Kubernetes secrets) or an environment variable.
public struct SecretOption: Sendable, Hashable {
    /// The flag that takes the value itself, e.g. `--secret`.
    public let flag: String
    /// The flag that names a file holding it, e.g. `--secret-file`.
    public let fileFlag: String
    /// The environment variable read when neither flag is given, e.g. `ROOMD_SECRET`.
    public let environment: String

    /// Names the three sources of one secret.
    public init(flag: String, fileFlag: String, environment: String) {
        self.flag = flag
        self.fileFlag = fileFlag
        self.environment = environment
    }

    /// The secret from `value` (the flag), else the file at `file`, else the
    /// environment; nil when none is given. Giving both flags is an error.
    /// A file's trailing line breaks are removed (`echo secret > file`
    /// works); an empty secret from any source is an error naming it.
    /// Call from any thread.
    public func resolve(value: String?, file: String?,
                        environment variables: [String: String] = ProcessInfo.processInfo.environment)
        throws(OptionError) -> String? {
        switch (value, file) {
        case (_?, _?):
            throw OptionError(flag: flag, problem: "give \(flag) or \(fileFlag), not both")
        case (let text?, nil):
            guard !text.isEmpty else { throw OptionError(flag: flag, problem: "must not be empty") }
            return text
        case (nil, let path?):
            guard let data = FileManager.default.contents(atPath: path) else {
                throw OptionError(flag: fileFlag, problem: "cannot read \(path)")
            }
            guard var text = String(data: data, encoding: .utf8) else {
                throw OptionError(flag: fileFlag, problem: "\(path) is not UTF-8 text")
            }
            while let last = text.last, last == "\n" || last == "\r" || last == "\r\n" { text.removeLast() }
            guard !text.isEmpty else { throw OptionError(flag: fileFlag, problem: "\(path) is empty") }
            return text
        case (nil, nil):
            guard let text = variables[environment] else { return nil }
            guard !text.isEmpty else { throw OptionError(flag: environment, problem: "is set but empty") }
            return text
        }
    }

    /// As `resolve`, but a missing secret is an error saying the three ways to give it.
    public func require(value: String?, file: String?,
                        environment variables: [String: String] = ProcessInfo.processInfo.environment)
        throws(OptionError) -> String {
        guard let secret = try resolve(value: value, file: file, environment: variables) else {
            throw OptionError(flag: flag, problem: "missing: give \(fileFlag) FILE, set \(environment), or \(flag) (visible in ps)")
        }
        return secret
    }
}
