// The one set of rules for applying a room event to a room's content
// (PROTOCOL.md §7–§8). The client engine, the player and roomd all apply
// events through it, so what a member sees, what a recording replays and
// what the server keeps cannot drift apart.

/// What applying one room event changed.
public struct RoomChange: Sendable, Hashable {
    /// The top-level `RoomState` keys whose value changed (in
    /// ``RoomState/patchKeys`` order); only a `state` event changes any.
    public var stateKeys: [String] = []
    /// The member list or a member's member state changed.
    public var members = false
    /// The stream list changed.
    public var streams = false
    /// The extra-info key that was set, if any.
    public var extraInfoKey: String?

    public init() {}

    /// Nothing changed (a magix event, or a patch that set what was there).
    public var isEmpty: Bool { stateKeys.isEmpty && !members && !streams && extraInfoKey == nil }
}

/// A room's content as room events change it: the room state, the members,
/// the streams and the extra-info map. `RoomSnapshot` (roomd, recordings),
/// the client's `RoomContent` and the player's state conform.
public protocol RoomContentModel {
    var state: RoomState { get set }
    var members: [Member] { get set }
    var streams: [MediaStream] { get set }
    var extraInfo: [String: String] { get set }
}

extension RoomContentModel {
    /// Applies one room event and returns what changed. Pure apart from
    /// `self`: an event that cannot be applied (a `state` patch of the wrong
    /// shape, 1009006) throws and leaves the content as it was.
    ///
    /// - `state`: the patch merges as `RoomState.applying(patch:)` says.
    /// - `memberState`: replaces that member's member state (an unknown
    ///   member changes nothing).
    /// - `userUpdate` / `streamUpdate`: entries with the same ID are removed;
    ///   an `add` then appends the given ones in order.
    /// - `extraInfo`: sets the key. `magix`: changes nothing.
    @discardableResult
    public mutating func apply(_ event: RoomEventBody) throws(ProtocolError) -> RoomChange {
        var change = RoomChange()
        switch event {
        case .state(_, let patch):
            let (next, keys) = try state.applying(patch: patch)
            state = next
            change.stateKeys = keys
        case .memberState(let memberId, let memberState):
            if let index = members.firstIndex(where: { $0.memberId == memberId }) {
                change.members = members[index].memberState != memberState
                members[index].memberState = memberState
            }
        case .userUpdate(let type, let users):
            let ids = Set(users.map(\.memberId))
            let before = members.count
            members.removeAll { ids.contains($0.memberId) }
            if type == .add { members.append(contentsOf: users) }
            change.members = type == .add || members.count != before
        case .streamUpdate(let type, let list):
            let ids = Set(list.map(\.id))
            let before = streams.count
            streams.removeAll { ids.contains($0.id) }
            if type == .add { streams.append(contentsOf: list) }
            change.streams = type == .add || streams.count != before
        case .extraInfo(_, let key, let value):
            extraInfo[key] = value
            change.extraInfoKey = key
        case .magix:
            break
        }
        return change
    }
}

extension RoomSnapshot: RoomContentModel {}
