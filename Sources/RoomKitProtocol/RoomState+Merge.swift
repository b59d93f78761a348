// Pure merge rules for `setState` and `setMemberState` (PROTOCOL.md §7).

extension RoomState {
    /// The keys a `setState` patch may have, in the order `applying(patch:)`
    /// reports them.
    public static let patchKeys = ["globalState", "sceneState", "broadcastState"]

    /// Checks the shape of a `setState` patch without applying it: only the
    /// keys in ``patchKeys``; `globalState` an object; `sceneState` and
    /// `broadcastState` valid (see their `init(json:)`). Every problem is
    /// 1009006 ("patch of the wrong shape", PROTOCOL.md §3).
    public static func validate(patch: [String: JSON]) throws(ProtocolError) {
        _ = try ValidatedPatch(patch)
    }

    /// Applies a `setState` patch and returns the new state and the patch's
    /// keys whose application changed the state (in ``patchKeys`` order).
    ///
    /// - `globalState` (object) is merged one level deep: each key replaces
    ///   the old value; a `null` value deletes the key.
    /// - `sceneState` and `broadcastState` replace the old value whole.
    ///
    /// Throws 1009006 for any other key or an invalid value; the state is
    /// then unchanged (the method is pure).
    public func applying(patch: [String: JSON]) throws(ProtocolError) -> (RoomState, changedKeys: [String]) {
        let validated = try ValidatedPatch(patch)
        var next = self
        var changed: [String] = []
        if let global = validated.globalState {
            next.globalState = RoomState.mergeMemberState(globalState, global)
            if next.globalState != globalState { changed.append("globalState") }
        }
        if let scenes = validated.sceneState, scenes != sceneState {
            next.sceneState = scenes
            changed.append("sceneState")
        }
        if let broadcast = validated.broadcastState, broadcast != broadcastState {
            next.broadcastState = broadcast
            changed.append("broadcastState")
        }
        return (next, changedKeys: changed)
    }

    /// Merges a `setMemberState` patch (or a `globalState` patch) one level
    /// deep: each key of `patch` replaces the old value; a `null` value
    /// deletes the key.
    public static func mergeMemberState(_ old: [String: JSON], _ patch: [String: JSON]) -> [String: JSON] {
        var merged = old
        for (key, value) in patch {
            if value.isNull {
                merged.removeValue(forKey: key)
            } else {
                merged[key] = value
            }
        }
        return merged
    }
}

/// A `setState` patch whose shape has been checked.
private struct ValidatedPatch {
    var globalState: [String: JSON]?
    var sceneState: SceneState?
    var broadcastState: BroadcastState?

    init(_ patch: [String: JSON]) throws(ProtocolError) {
        for key in patch.keys where !RoomState.patchKeys.contains(key) {
            throw .invalidArgument("patch may only have globalState, sceneState, broadcastState")
        }
        if let value = patch["globalState"] {
            guard let object = value.objectValue else {
                throw .invalidArgument("patch.globalState must be an object")
            }
            globalState = object
        }
        do {
            if let value = patch["sceneState"] {
                sceneState = try SceneState(json: value)
            }
            if let value = patch["broadcastState"] {
                broadcastState = try BroadcastState(json: value)
            }
        } catch {
            // Inside a patch, a wrong type is still "a patch of the wrong shape".
            throw .invalidArgument("patch." + error.message)
        }
    }
}

extension BroadcastState {
    /// The broadcast state after member `memberId` sends `setViewMode(mode)`
    /// (PROTOCOL.md §5): `broadcaster` makes that member the broadcaster;
    /// `freedom` or `follower` from the current broadcaster resets to
    /// `{mode: freedom, broadcasterId: null}`, and from anyone else changes nothing.
    public func applyingViewMode(_ mode: ViewMode, by memberId: Int64) -> BroadcastState {
        switch mode {
        case .broadcaster:
            return BroadcastState(mode: .broadcaster, broadcasterId: memberId)
        case .freedom, .follower:
            guard broadcasterId == memberId else { return self }
            return BroadcastState(mode: .freedom, broadcasterId: nil)
        }
    }
}
