/// The benchmarks' door (Benchmarks/: isolation-bench, plugin-bench), not
/// an API: `@_spi(Benchmarks) import RoomKitPluginHost`.
extension PluginManager {
    /// A player event whose payload is the JSON object text `payloadText`,
    /// fanned out exactly as `dispatchPlayerEvent(kind:room:encoding:)` fans
    /// out an encoded one (an `EventEncoding` comes only from a real
    /// `Player`). Loop thread, as the real one.
    @_spi(Benchmarks) public func dispatchPlayerEvent(kind: Int32, room: String, payloadText: String) {
        dispatchPlayerEvent(kind: kind, room: room, text: payloadText)
    }

    /// Ends the loop turn now: its batches go to the plugins' queues, as
    /// when the turn ends by itself (`flushTurn`, posted behind the work
    /// already queued on the loop, so a bench posting its callbacks faster
    /// than the loop runs them would make them all one turn). Loop thread.
    @_spi(Benchmarks) public func endTurn() {
        flushTurn()
    }
}
