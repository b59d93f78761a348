import Foundation

/// A server child process a test starts (roomd, redis-server): stopping it
/// gracefully or with SIGKILL, the same way for each.
public protocol ChildServer: AnyObject {
    /// The running child (nil before start and after a stop or kill).
    var process: Process? { get set }
}

extension ChildServer {
    /// The running child's process ID, if any.
    public var pid: Int32? { process?.processIdentifier }

    /// SIGKILL: no chance to flush or save anything.
    public func kill9() {
        guard let process else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        self.process = nil
    }

    /// SIGTERM, then wait for the exit.
    public func stop() {
        guard let process else { return }
        process.terminate()
        process.waitUntilExit()
        self.process = nil
    }
}
