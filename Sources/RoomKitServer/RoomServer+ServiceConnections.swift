import RoomKitProtocol

/// Service connections (docs/PROTOCOL.md "Service connections"): a `hello`
/// with a `service` token gives its connection the service request bucket.
extension RoomServer {
    /// The request bucket of a service connection (docs/PROTOCOL.md "Service connections").
    var serviceRateLimits: RateBucket.Limits {
        RateBucket.Limits(burst: configuration.serviceRateLimitBurst, perSecond: configuration.serviceRateLimitPerSecond,
                          grace: configuration.rateLimitGrace.milliseconds, episodeGap: Self.refusalEpisodeGap)
    }

    /// A `hello` with a token: a valid `service` token gives the connection
    /// the service request bucket (full, less the hello's own token);
    /// anything else is refused 1002033 and the connection stays un-greeted.
    func admitService(_ token: String, link: ClientLink, now: Int64) throws(ProtocolError) {
        let claims: TokenClaims
        do {
            claims = try signer.verify(token, now: now / 1000)
        } catch {
            noteTokenRejected("\(error)", in: "hello", room: nil, connection: link.id, now: now)
            throw ProtocolError(code: .tokenInvalid, message: "hello token rejected: \(error.reason)")
        }
        guard claims.role == .service else {
            noteTokenRejected("a hello token must have role service, not \(claims.role.rawValue)", in: "hello", room: nil,
                              connection: link.id, now: now)
            throw ProtocolError(code: .tokenInvalid, message: "a hello token must have role service, not \(claims.role.rawValue)")
        }
        link.requests = RateBucket(serviceRateLimits, now: now)
        _ = link.requests.take(now: now)
        logger.debug("service connection", metadata: ["connection": "\(link.id)", "user": "\(claims.sub)"])
    }
}
