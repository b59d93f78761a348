import Foundation

/// A value behind a `pthread_mutex`. Use it like `Synchronization.Mutex`
/// (`withLock { value in … }`); it exists because ThreadSanitizer models
/// pthread mutexes but not the raw futex calls `Mutex` uses on Linux, so
/// with `Mutex` every guarded access shows up as a race and real races hide
/// behind them.
public final class LockedValue<Value>: @unchecked Sendable {
    // @unchecked Sendable: `value` is only touched between lock and unlock.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// No run-time exclusivity check: only touched between lock and unlock,
    /// and the mutex (not recursive) already rules out overlapping access.
    /// The check cost more than the lock on hot paths.
    @exclusivity(unchecked) private var value: Value

    public init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    @inlinable
    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock()
        defer { unlock() }
        return try body(&valueStorage)
    }

    /// The value, read under the lock. Read a closure (or a value holding
    /// one) this way, not with `withLock { $0 }`: that writes the value back
    /// through the generic storage, and a closure comes back wrapped in one
    /// more reabstraction thunk each time, so each later call walks a longer
    /// chain (roombot's store did, once per save: 13% of its samples at
    /// 300,000 rooms). This read writes nothing back.
    @inlinable
    public var current: Value {
        lock()
        defer { unlock() }
        return valueStorage
    }

    @usableFromInline
    var valueStorage: Value {
        get { value }
        _modify { yield &value }
    }

    @usableFromInline
    func lock() { pthread_mutex_lock(mutex) }

    @usableFromInline
    func unlock() { pthread_mutex_unlock(mutex) }
}
