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

    func renewAutomatically(_ record: SessionRecord) {
        guard let provider = tokenProvider else { return }
        let roomID = record.room.id
        let user = record.user.id
        Task { [self] in
            do {
                let token = try await provider.token(room: roomID, user: user)
                try await renewToken(roomID, token: token)
            } catch {
                loop.execute { [self] in
                    emit(.throwError(domain: "token", code: (error as? RoomError)?.code ?? .tokenInvalid,
                                     message: "could not renew the token of \(roomID): \(error)"), room: nil)
                }
            }
        }
    }
}
