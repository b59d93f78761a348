extension EventLoop {
    /// The `uv_loop_t *` for a C library's libuv adapter (hiredis's
    /// `adapters/libuv.h`), untyped so the caller need not import libuv.
    /// Loop thread only, and only for attaching handles that the C library
    /// closes before the loop shuts down (register a shutdown hook).
    @_spi(ForeignEventLib)
    public var uvLoopPointer: UnsafeMutableRawPointer {
        preconditionInEventLoop()
        return UnsafeMutableRawPointer(uv)
    }
}
