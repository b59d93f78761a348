import Foundation
import RoomKitLoop
import RoomKitProtocol

// Token renewal: the server warns 30 s before a token expires
// (`tokenWillExpire`); with a token provider the host renews by itself.
extension RoomHost {
    /// Replaces the room's token. The new token's role applies (a reader
    /// role makes the session read-only). A rejected token throws 1002033 and
    /// the old one stays.
    public func renewToken(_ roomID: String, token: String) async throws {
        let fields = try await requestFields(.renewToken(token: token), room: roomID)
        try await loop.submit { [self] in
            guard let record = sessions[roomID] else { return }
            record.token = token
            if let expiresAt = fields["expiresAt"]?.int64Value { record.tokenExpiresAt = expiresAt }
            if let writable = fields["writable"]?.boolValue { setWritable(writable, record: record) }
        }
    }

    /// Asks the token provider for a new token and renews with it (on
    /// `tokenWillExpire`, which the server sends once per token). One
    /// renewal at a time per session. A provider that answers with the token
    /// in use is asked again after `tokenRecheckFirst`, doubling up to
    /// `backoffCap`, while the token lives: renewing with the same token
    /// would gain nothing. Loop thread only.
    func renewAutomatically(_ record: SessionRecord) {
        guard let provider = tokenProvider, !record.renewing else { return }
        record.renewing = true
        let roomID = record.room.id
        let user = record.user.id
        let current = record.token
        let identity = ObjectIdentifier(record)
        Task { [self] in
            do {
                let token = try await provider.token(room: roomID, user: user)
                if token == current {
                    loop.execute { [self] in
                        guard let record = liveRecord(roomID, identity) else { return }
                        sameTokenFromProvider(record)
                    }
                    return
                }
                try await renewToken(roomID, token: token)
                loop.execute { [self] in
                    guard let record = liveRecord(roomID, identity) else { return }
                    record.renewing = false
                    record.sameTokenAnswers = 0
                }
            } catch {
                loop.execute { [self] in
                    // A renewal that failed because the room was left meanwhile
                    // (its logout, a kick) is no error of the token's.
                    guard let record = liveRecord(roomID, identity) else { return }
                    record.renewing = false
                    guard record.machine.isLoggedIn else { return }
                    emit(.throwError(domain: "token", code: (error as? RoomError)?.code ?? .tokenInvalid,
                                     message: "could not renew the token of \(roomID): \(error)"), room: nil)
                }
            }
        }
    }

    /// The session record of `roomID` if it is still the one with `identity`.
    private func liveRecord(_ roomID: String, _ identity: ObjectIdentifier) -> SessionRecord? {
        guard let record = sessions[roomID], ObjectIdentifier(record) == identity else { return nil }
        return record
    }

    /// The provider gave back the token that is about to expire: says so
    /// once, then asks again later (backoff) while the session and its token last.
    private func sameTokenFromProvider(_ record: SessionRecord) {
        record.renewing = false
        let attempt = Int(record.sameTokenAnswers)
        if record.sameTokenAnswers < .max { record.sameTokenAnswers += 1 }
        let cap = max(1, configuration.backoffCap.milliseconds)
        var delay = min(cap, max(1, configuration.tokenRecheckFirst.milliseconds))
        for _ in 0..<attempt where delay < cap { delay = delay > cap / 2 ? cap : delay * 2 }
        let left = record.tokenExpiresAt - environment.wallMilliseconds
        if attempt == 0 {
            emit(.throwError(domain: "token", code: .tokenInvalid,
                             message: "the token provider returned the token of \(record.room.id) that expires in "
                                 + "\(max(0, left / 1000)) s; asking again in \(delay) ms, not renewing with the same token"),
                 room: nil)
        }
        guard left > delay else { return }
        let roomID = record.room.id
        let identity = ObjectIdentifier(record)
        _ = loop.schedule(after: .milliseconds(delay)) { [weak self] in
            // Not after the room was left (a logout or kick before the recheck).
            guard let self, let record = liveRecord(roomID, identity), record.machine.isLoggedIn else { return }
            renewAutomatically(record)
        }
    }
}

extension RoomHost {
    /// Whether a token renewal (`renewAutomatically`) is still on its way:
    /// the simulator waits for it before virtual time moves on, so a renewal
    /// never depends on how fast a task is scheduled. Loop thread only.
    package var tokenRenewalsPending: Bool {
        sessions.values.contains { $0.renewing }
    }
}
