import RoomKitLoop
import Foundation
import RoomKitProtocol
import Synchronization

/// Everything a `Player` reports, as one value (the `AsyncSequence` form),
/// in the order it happened.
public enum PlayerEvent: Sendable, Hashable {
    /// The phase changed (`phaseChanged`).
    case phaseChanged(PlayerPhase)
    /// The first frame (the snapshot at the start position) is loaded; fires once.
    case loadFirstFrame
    /// Playback entered another slice, named `"start-end"` (ms of the recording).
    case sliceChanged(String)
    /// The state changed; only the changed keys are set. The player's
    /// synchronous properties already show the new state.
    case playerStateChanged(PlayerStateDiff)
    /// The player stopped because of `error` (phase `stopped` came just before).
    case stoppedWithError(PlayerError)
    /// The playback position, ms after `beginTimestamp`: while playing every
    /// `progressInterval`, and on pause, buffering, seek and end.
    case scheduleTimeChanged(Int64)
    /// A frame could not be applied, or its `globalState` does not decode as
    /// the registered type; playback goes on.
    case errorWhenAppendFrame(PlayerError)
    /// A custom event, replayed at its recorded time.
    case magix(MagixEvent)

    /// The event's name in the event log (CLI.md, player events of `replay`).
    public var logName: String {
        switch self {
        case .phaseChanged: return "playerPhase"
        case .loadFirstFrame: return "loadFirstFrame"
        case .sliceChanged: return "sliceChanged"
        case .playerStateChanged: return "playerStateChanged"
        case .stoppedWithError: return "stoppedWithError"
        case .scheduleTimeChanged: return "scheduleTimeChanged"
        case .errorWhenAppendFrame: return "errorWhenAppendFrame"
        case .magix: return "magix"
        }
    }

    /// The event's fields in the event log (CLI.md), without `ts` and `event`.
    public var logFields: [String: JSON] {
        switch self {
        case .phaseChanged(let phase): return ["phase": .string(phase.rawValue)]
        case .loadFirstFrame: return [:]
        case .sliceChanged(let slice): return ["slice": .string(slice)]
        case .playerStateChanged(let diff): return ["keys": .array(diff.keys.map(JSON.string))]
        case .stoppedWithError(let error), .errorWhenAppendFrame(let error): return ["error": .string(error.description)]
        case .scheduleTimeChanged(let time): return ["time": .int(time)]
        case .magix(let magix):
            return ["room": .string(magix.room), "from": .int(magix.from), "event": .string(magix.event),
                    "payload": magix.payload]
        }
    }
}

/// Player callbacks (the whiteboard seed's `WhitePlayerEventDelegate`). All
/// optional; delivered in order on the player's callback queue (default:
/// the loop thread).
public protocol PlayerEventDelegate: AnyObject, Sendable {
    func phaseChanged(_ player: Player, phase: PlayerPhase)
    func loadFirstFrame(_ player: Player)
    func sliceChanged(_ player: Player, slice: String)
    /// `diff` holds only what changed; `player`'s properties already show it.
    func playerStateChanged(_ player: Player, diff: PlayerStateDiff)
    func stoppedWithError(_ player: Player, error: PlayerError)
    func scheduleTimeChanged(_ player: Player, time: Int64)
    func errorWhenAppendFrame(_ player: Player, error: PlayerError)
    func fireMagixEvent(_ player: Player, event: MagixEvent)
}

extension PlayerEventDelegate {
    public func phaseChanged(_ player: Player, phase: PlayerPhase) {}
    public func loadFirstFrame(_ player: Player) {}
    public func sliceChanged(_ player: Player, slice: String) {}
    public func playerStateChanged(_ player: Player, diff: PlayerStateDiff) {}
    public func stoppedWithError(_ player: Player, error: PlayerError) {}
    public func scheduleTimeChanged(_ player: Player, time: Int64) {}
    public func errorWhenAppendFrame(_ player: Player, error: PlayerError) {}
    public func fireMagixEvent(_ player: Player, event: MagixEvent) {}
}

extension PlayerEvent {
    /// Calls the delegate method for this event.
    func deliver(to delegate: any PlayerEventDelegate, player: Player) {
        switch self {
        case .phaseChanged(let phase): delegate.phaseChanged(player, phase: phase)
        case .loadFirstFrame: delegate.loadFirstFrame(player)
        case .sliceChanged(let slice): delegate.sliceChanged(player, slice: slice)
        case .playerStateChanged(let diff): delegate.playerStateChanged(player, diff: diff)
        case .stoppedWithError(let error): delegate.stoppedWithError(player, error: error)
        case .scheduleTimeChanged(let time): delegate.scheduleTimeChanged(player, time: time)
        case .errorWhenAppendFrame(let error): delegate.errorWhenAppendFrame(player, error: error)
        case .magix(let event): delegate.fireMagixEvent(player, event: event)
        }
    }
}
