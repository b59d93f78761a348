// Signing and verifying room tokens: JWT HS256 (PROTOCOL.md §9) through
// OpenSSL. Its own module, so that the protocol (and so the plugin SDK)
// needs no OpenSSL; the claims and errors are in RoomKitProtocol.

import COpenSSLCrypto
#if canImport(Glibc)
import Glibc
#endif
import RoomKitProtocol

/// Signs and verifies room tokens with a shared secret (HMAC-SHA256 via OpenSSL).
///
/// Thread-safe (an immutable value). The secret never appears in
/// `description`, `debugDescription` or mirrors.
public struct TokenSigner: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    private let secret: [UInt8]

    /// The base64url of the fixed header `{"alg":"HS256","typ":"JWT"}`.
    private static let encodedHeader = Base64URL.encode(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8))

    /// A signer for the UTF-8 bytes of `secret`.
    public init(secret: String) {
        self.secret = Array(secret.utf8)
    }

    /// A signer for raw secret bytes.
    public init(secretBytes: [UInt8]) {
        self.secret = secretBytes
    }

    /// "TokenSigner(secret: redacted)".
    public var description: String { "TokenSigner(secret: redacted)" }
    /// Same as ``description``.
    public var debugDescription: String { description }
    /// A mirror without children, so `dump` cannot reveal the secret.
    public var customMirror: Mirror { Mirror(self, children: [:]) }

    /// Signs `claims` as a compact JWT: header `{"alg":"HS256","typ":"JWT"}`,
    /// the claims serialized with sorted keys, each base64url, then the
    /// HMAC-SHA256 of `header.payload`.
    public func sign(_ claims: TokenClaims) -> String {
        let payload = Base64URL.encode(claims.json.serialized(sortedKeys: true))
        let signingInput = Self.encodedHeader + "." + payload
        let signature = Self.hmacSHA256(key: secret, message: Array(signingInput.utf8)) ?? []
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// Verifies `token` and returns its claims.
    ///
    /// Checks, in order: at most 8 KiB; three unpadded base64url parts; the
    /// header a JSON object with `alg` exactly `HS256` (no `crit`); the
    /// signature (constant-time compare); the payload a JSON object with
    /// string `sub`, `room`, `role` (reader/writer/admin), numeric `exp` and
    /// `iat`, optional numeric `nbf` (each in 0...253402300799, the end of
    /// year 9999) and string `app`; then `exp > now - leeway`
    /// and `nbf <= now + leeway`. Fractional times are rounded down.
    ///
    /// - Parameters:
    ///   - now: the current time in seconds since the Unix epoch.
    ///   - leeway: seconds of clock skew to tolerate (negative counts as 0).
    public func verify(_ token: String, now: Int64, leeway: Int64 = 0) throws(TokenError) -> TokenClaims {
        let bytes = Array(token.utf8)
        guard bytes.count <= ProtocolLimits.maxTokenBytes else {
            throw TokenError(reason: .malformed, message: "token too long")
        }
        let parts = bytes.split(separator: UInt8(ascii: "."), maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 3 else {
            throw TokenError(reason: .malformed, message: "token must have three parts")
        }
        guard let header = Self.decodeObject(parts[0]) else {
            throw TokenError(reason: .malformed, message: "token header is not a base64url JSON object")
        }
        guard header["alg"]?.stringValue == "HS256" else {
            throw TokenError(reason: .badAlgorithm, message: "token algorithm must be HS256")
        }
        guard header["crit"] == nil else {
            throw TokenError(reason: .malformed, message: "token has unsupported critical headers")
        }
        guard let signature = Base64URL.decode(parts[2]) else {
            throw TokenError(reason: .malformed, message: "token signature is not base64url")
        }
        let signingInput = bytes[..<parts[1].endIndex]
        guard let expected = Self.hmacSHA256(key: secret, message: Array(signingInput)),
            Self.constantTimeEqual(expected, signature)
        else {
            throw TokenError(reason: .badSignature, message: "token signature mismatch")
        }
        guard let payload = Self.decodeObject(parts[1]) else {
            throw TokenError(reason: .malformed, message: "token payload is not a base64url JSON object")
        }
        let claims = try Self.claims(from: payload)
        try Self.checkTimes(claims, now: now, leeway: leeway)
        return claims
    }

    /// The time checks of `verify(_:now:leeway:)`, alone: `exp > now - leeway`
    /// and `nbf <= now + leeway` (seconds; a negative leeway counts as 0).
    /// `VerifiedTokenCache` runs them on every use of a cached token.
    public static func checkTimes(_ claims: TokenClaims, now: Int64, leeway: Int64 = 0) throws(TokenError) {
        let slack = max(0, leeway)
        let (earliest, lowOverflow) = now.subtractingReportingOverflow(slack)
        guard claims.exp > (lowOverflow ? .min : earliest) else {
            throw TokenError(reason: .expired, message: "token expired")
        }
        let (latest, highOverflow) = now.addingReportingOverflow(slack)
        if let nbf = claims.nbf, nbf > (highOverflow ? .max : latest) {
            throw TokenError(reason: .notYetValid, message: "token not yet valid")
        }
    }

    // MARK: Helpers

    private static func decodeObject(_ part: ArraySlice<UInt8>) -> [String: JSON]? {
        guard let bytes = Base64URL.decode(part), let json = try? JSON.parse(bytes) else { return nil }
        return json.objectValue
    }

    private static func claims(from payload: [String: JSON]) throws(TokenError) -> TokenClaims {
        func bad(_ message: String) -> TokenError { TokenError(reason: .badClaims, message: message) }
        guard let sub = payload["sub"]?.stringValue else { throw bad("token sub must be a string") }
        guard let room = payload["room"]?.stringValue else { throw bad("token room must be a string") }
        guard let roleName = payload["role"]?.stringValue, let role = TokenRole(rawValue: roleName) else {
            throw bad("token role must be reader, writer or admin")
        }
        guard let exp = numericDate(payload["exp"]) else { throw bad("token exp must be a NumericDate in 0...\(ExternalNumber.maxEpochSeconds)") }
        guard let iat = numericDate(payload["iat"]) else { throw bad("token iat must be a NumericDate in 0...\(ExternalNumber.maxEpochSeconds)") }
        var nbf: Int64?
        if let value = payload["nbf"], !value.isNull {
            guard let date = numericDate(value) else { throw bad("token nbf must be a NumericDate in 0...\(ExternalNumber.maxEpochSeconds)") }
            nbf = date
        }
        var app: String?
        if let value = payload["app"], !value.isNull {
            guard let text = value.stringValue else { throw bad("token app must be a string") }
            app = text
        }
        return TokenClaims(sub: sub, room: room, role: role, exp: exp, iat: iat, nbf: nbf, app: app)
    }

    /// A JWT NumericDate as whole seconds (rounded down), or nil: a number
    /// in ``ExternalNumber/epochSeconds`` (1970 through year 9999), so that
    /// every later `* 1000` (ms on the wire) fits Int64.
    private static func numericDate(_ value: JSON?) -> Int64? {
        let seconds: Int64?
        switch value {
        case .int(let value)?:
            seconds = value
        case .double(let value)?:
            seconds = value.isFinite ? Int64(exactly: value.rounded(.down)) : nil
        default:
            seconds = nil
        }
        guard let seconds, ExternalNumber.epochSeconds.contains(seconds) else { return nil }
        return seconds
    }

    static func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8]? {
        guard key.count <= Int(Int32.max), let prototype = HMACPrototype.shared,
              let context = EVP_MAC_CTX_dup(prototype.context) else { return nil }
        defer { EVP_MAC_CTX_free(context) }
        var output = [UInt8](repeating: 0, count: 64)
        var length = 0
        // OpenSSL wants a non-null key pointer even for an empty key.
        let keyBytes = key.isEmpty ? [0] : key
        let ok = keyBytes.withUnsafeBufferPointer { keyBuffer in
            message.withUnsafeBufferPointer { messageBuffer in
                output.withUnsafeMutableBufferPointer { outputBuffer in
                    EVP_MAC_init(context, keyBuffer.baseAddress, key.count, nil) == 1
                        && EVP_MAC_update(context, messageBuffer.baseAddress, messageBuffer.count) == 1
                        && EVP_MAC_final(context, outputBuffer.baseAddress, &length, outputBuffer.count) == 1
                }
            }
        }
        guard ok, length == 32 else { return nil }
        return Array(output.prefix(32))
    }

    static func constantTimeEqual(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        guard lhs.count == rhs.count, !lhs.isEmpty else { return false }
        return lhs.withUnsafeBytes { left in
            rhs.withUnsafeBytes { right in
                CRYPTO_memcmp(left.baseAddress, right.baseAddress, left.count) == 0
            }
        }
    }
}

/// An HMAC-SHA256 context with its digest set and no key, made once and
/// duplicated for every MAC (`EVP_MAC_CTX_dup`, then `EVP_MAC_init` with the
/// key). OpenSSL 3's one-shot `HMAC()` looks the MAC and the digest up on
/// every call, and each lookup gives the calling thread a per-thread error
/// state (904 bytes) that lives until that thread exits: on the Swift
/// cooperative pool's threads, alive at process exit, LeakSanitizer reported
/// it. A duplicate needs no lookup. The prototype itself is made on a
/// short-lived thread of its own, so the error state its lookup creates
/// goes with that thread.
private final class HMACPrototype: @unchecked Sendable {
    // @unchecked Sendable: `context` is never changed after init; it is only
    // read, by `EVP_MAC_CTX_dup`.
    let context: OpaquePointer

    private init(context: OpaquePointer) {
        self.context = context
    }

    static let shared: HMACPrototype? = {
        final class Result {
            var context: OpaquePointer?
        }
        let result = Result()
        let argument = Unmanaged.passRetained(result).toOpaque()
        var thread = pthread_t()
        let started = pthread_create(&thread, nil, { argument in
            let result = Unmanaged<Result>.fromOpaque(argument!).takeRetainedValue()
            guard let mac = EVP_MAC_fetch(nil, "HMAC", nil) else { return nil }
            defer { EVP_MAC_free(mac) }
            guard let context = EVP_MAC_CTX_new(mac) else { return nil }
            let set = "digest".withCString { key in
                "SHA256".withCString { value in
                    var params = [OSSL_PARAM_construct_utf8_string(key, UnsafeMutablePointer(mutating: value), 0),
                                  OSSL_PARAM_construct_end()]
                    return EVP_MAC_CTX_set_params(context, &params)
                }
            }
            if set == 1 { result.context = context } else { EVP_MAC_CTX_free(context) }
            return nil
        }, argument)
        if started == 0 {
            pthread_join(thread, nil)
        } else {
            Unmanaged<Result>.fromOpaque(argument).release()
        }
        return result.context.map(HMACPrototype.init(context:))
    }()
}
