import Foundation
import RoomKitProtocol

/// Supplies tokens so the host can log in, resume and renew by itself.
public protocol TokenProvider: Sendable {
    /// A valid token for `user` in `room`.
    func token(room: String, user: String) async throws -> String
}

/// A token provider from a closure.
public struct ClosureTokenProvider: TokenProvider {
    let body: @Sendable (String, String) async throws -> String
    public init(_ body: @escaping @Sendable (_ room: String, _ user: String) async throws -> String) {
        self.body = body
    }
    public func token(room: String, user: String) async throws -> String {
        try await body(room, user)
    }
}
