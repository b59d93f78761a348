import RoomKitLoop

/// A Lua script run with `EVALSHA`; its SHA-1 is learned from
/// `SCRIPT LOAD`, which runs again whenever the server answers `NOSCRIPT`
/// (a restarted Redis has an empty script cache).
///
/// Loop thread only (the cached SHA is not locked).
public final class RedisScript: @unchecked Sendable {
    // @unchecked Sendable: `sha` is read and written on the loop thread only.
    /// A name for logs and errors.
    public let name: String
    /// The Lua source.
    public let source: String
    private var sha: String?

    /// Creates a script; nothing is sent until its first `evaluate`.
    public init(name: String, source: String) {
        self.name = name
        self.source = source
    }
}

extension RedisClient {
    /// Runs `script` with `keys` and `arguments`: `EVALSHA`, loading the
    /// script first when its SHA is unknown or the server says `NOSCRIPT`.
    /// An error reply from the script arrives as `.success(.error(...))`.
    /// Loop thread only; `completion` runs once, on the loop thread.
    public func evaluate(_ script: RedisScript, keys: [String], arguments: [String],
                         completion: @escaping (Result<RedisValue, RedisError>) -> Void) {
        evaluate(script, keys: keys, arguments: arguments, retried: false, completion: completion)
    }

    private func evaluate(_ script: RedisScript, keys: [String], arguments: [String], retried: Bool,
                          completion: @escaping (Result<RedisValue, RedisError>) -> Void) {
        guard let sha = script.cachedSHA else {
            return command(["SCRIPT", "LOAD", script.source]) { [self] result in
                switch result {
                case .success(.bulk(let bytes)):
                    script.cachedSHA = String(decoding: bytes, as: UTF8.self)
                    evaluate(script, keys: keys, arguments: arguments, retried: retried, completion: completion)
                case .success(let other):
                    completion(.failure(RedisError(code: .server, message: "SCRIPT LOAD \(script.name): \(other)")))
                case .failure(let error):
                    completion(.failure(error))
                }
            }
        }
        command(["EVALSHA", sha, String(keys.count)] + keys + arguments) { [self] result in
            if case .success(.error(let text)) = result, text.hasPrefix("NOSCRIPT"), !retried {
                script.cachedSHA = nil
                return evaluate(script, keys: keys, arguments: arguments, retried: true, completion: completion)
            }
            completion(result)
        }
    }
}

extension RedisScript {
    /// The SHA-1 `SCRIPT LOAD` returned. Loop thread only.
    var cachedSHA: String? {
        get { sha }
        set { sha = newValue }
    }
}
