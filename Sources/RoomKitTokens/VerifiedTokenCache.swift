import RoomKitProtocol
import Synchronization

/// `TokenSigner.verify` with the tokens whose signature held remembered:
/// one bot signs all its logins with one token, and verifying it again for
/// each of them was 7.7% of roomd's samples while a bot logged in to
/// 1,000,000 rooms (issue #26).
///
/// Only a token that passed every check is kept (token string -> claims);
/// each use of it runs the time checks again (`TokenSigner.checkTimes`,
/// against the `now` of that use), so an expired or not-yet-valid token is
/// refused exactly as `verify` refuses it, with the same error. A token
/// that failed is never kept. Bounded: at most `capacity` tokens (each at
/// most `ProtocolLimits.maxTokenBytes`); when full, the cache starts over.
///
/// Thread-safe (one lock per call).
public final class VerifiedTokenCache: Sendable {
    /// The signer whose verdicts are kept.
    public let signer: TokenSigner
    /// How many tokens are kept at most.
    public let capacity: Int
    private let verified: Mutex<[String: TokenClaims]>

    /// A cache for `signer`'s verdicts, of at most `capacity` tokens (1,024 by default).
    public init(signer: TokenSigner, capacity: Int = 1024) {
        self.signer = signer
        self.capacity = max(1, capacity)
        verified = Mutex([:])
    }

    /// The claims of `token`, as `signer.verify(token, now:leeway:)` returns
    /// them (or throws), without checking a signature already checked.
    public func verify(_ token: String, now: Int64, leeway: Int64 = 0) throws(TokenError) -> TokenClaims {
        if let claims = verified.withLock({ $0[token] }) {
            try TokenSigner.checkTimes(claims, now: now, leeway: leeway)
            return claims
        }
        let claims = try signer.verify(token, now: now, leeway: leeway)
        verified.withLock { verified in
            if verified.count >= capacity { verified.removeAll(keepingCapacity: true) }
            verified[token] = claims
        }
        return claims
    }

    /// How many tokens are kept now.
    public var count: Int { verified.withLock { $0.count } }
}
