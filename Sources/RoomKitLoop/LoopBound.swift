/// A value that only its loop's thread may touch, checked at run time on
/// every access (NIO's `NIOLoopBoundBox`): a "loop thread only" comment
/// over a field checks nothing, this does.
///
/// It is `Sendable` so that an object holding loop-side state can be shared
/// across threads, while the state inside stays usable only on the loop:
/// any access from elsewhere traps. The check is one thread-local read
/// (`EventLoop.inEventLoop`), cheap enough for every access.
public final class LoopBound<Value>: @unchecked Sendable {
    // @unchecked Sendable: `stored` is read and written only after
    // `preconditionInEventLoop()` passed, i.e. on the one loop thread.

    /// The loop whose thread owns the value.
    public let loop: EventLoop
    private var stored: Value

    /// Wraps `value`. May be called on any thread: nothing reads the value
    /// until it is published to the loop.
    public init(_ value: Value, loop: EventLoop) {
        self.loop = loop
        stored = value
    }

    /// The value. Traps unless called on the loop thread.
    public var value: Value {
        _read {
            loop.preconditionInEventLoop()
            yield stored
        }
        _modify {
            loop.preconditionInEventLoop()
            yield &stored
        }
    }

    /// Runs `body` with the value, for several reads and writes under one
    /// check. Traps unless called on the loop thread.
    public func withValue<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        loop.preconditionInEventLoop()
        return try body(&stored)
    }
}
