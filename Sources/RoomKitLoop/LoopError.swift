import CLibUV

/// An error from libuv or libwebsockets, carrying the C function that failed.
///
/// Every negative result from a C call in this module is turned into a
/// `LoopError` by one helper (`uvCheck`), so a failure always names its cause.
public struct LoopError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let raw: String
        /// A libuv call returned a negative errno-style code.
        public static let uv = Code(raw: "uv")
        /// A libwebsockets call failed (context, vhost or connection creation).
        public static let lws = Code(raw: "lws")
        /// The loop was shut down, or is shutting down.
        public static let shutdown = Code(raw: "shutdown")
        /// The operation was called on the wrong thread.
        public static let wrongThread = Code(raw: "wrongThread")
        public var description: String { raw }
    }

    /// The failure's kind.
    public let code: Code
    /// The C function (or operation) that failed, e.g. `uv_timer_init`.
    public let function: String
    /// The libuv error number when `code == .uv`, else 0.
    public let errno: Int32
    /// Human-readable detail (libuv's `uv_strerror`, or a message).
    public let detail: String

    public init(code: Code, function: String, errno: Int32 = 0, detail: String) {
        self.code = code
        self.function = function
        self.errno = errno
        self.detail = detail
    }

    public var description: String {
        "\(function) failed: \(detail)" + (errno != 0 ? " (\(errno))" : "")
    }
}

/// Maps a libuv result to `LoopError` when it is negative (`uv_loop_close`
/// reports a busy loop as a negative code too). `onFailure` runs first, to
/// release what the failed call would have owned: a callback it will never
/// call, a handle it never initialised.
@discardableResult
func uvCheck(_ result: Int32, _ function: String, onFailure: () -> Void = {}) throws(LoopError) -> Int32 {
    if result < 0 {
        onFailure()
        throw LoopError(code: .uv, function: function, errno: result,
                        detail: String(cString: uv_strerror(result)))
    }
    return result
}
