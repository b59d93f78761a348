import Foundation
import Logging
import RoomKitLoop
import RoomKitSQLite

/// Limits and counters of the recording downloads in flight (`/metrics`,
/// docs/SECURITY.md). Loop thread only.
struct RecordingDownloads {
    /// The downloads streaming now, by identity.
    var active: [ObjectIdentifier: RecordingDownload] = [:]
    /// Requests answered 503 because `maxRecordingDownloads` were running.
    var refused = 0
    /// The most bytes one download ever had waiting for its client (its
    /// stream buffer): what the pacing bounds.
    var peakBufferedBytes = 0

    /// Bytes waiting for clients now, over every download.
    var bufferedBytes: Int { active.values.reduce(0) { $0 + $1.bufferedBytes } }
}

/// One recording answer streamed from the store without blocking the loop.
///
/// A reader thread of its own opens its own SQLite connection (WAL lets it
/// read while the loop writes) and runs `RecordingWriter`: the first pass
/// gives the header and the exact `Content-Length`, the second produces the
/// frame lines in chunks of `chunkBytes`. Each chunk hops to the loop and
/// into the response's `HTTPStream`; the reader then waits for credit, which
/// the loop gives while the stream holds at most `windowBytes`, and again
/// each time the socket took a piece (`onWritten`). So a slow reader slows
/// the download down (it is never dropped for being slow), and the memory a
/// download holds is about `windowBytes + chunkBytes` whatever the room's size.
final class RecordingDownload: @unchecked Sendable {
    // @unchecked Sendable: `state` and `waitingForWindow` are loop-thread-only
    // (asserted through `loop`); `credit` and `cancelled` are the only fields
    // the reader thread touches, a semaphore and a LockedValue.

    /// The loop side's lifecycle. Loop thread only.
    private enum State {
        /// The reader runs its first pass; nothing has been answered yet.
        case planning(HTTPResponder)
        /// The head is out and chunks flow into the stream.
        case streaming(HTTPStream)
        /// Finished, failed or the client left; the slot is free.
        case ended
    }

    let request: RecordingRequest
    private let loop: EventLoop
    private let logger: Logger
    private let databasePath: String
    private let windowBytes: Int
    private let chunkBytes: Int
    /// Called once on the loop thread when the download has ended (frees its slot).
    private let onEnd: (RecordingDownload) -> Void
    /// Tells the server how full the stream got (for the peak gauge).
    private let onBuffered: (Int) -> Void
    private var state: State
    /// The reader waits for credit (the stream was over its window). Loop thread only.
    private var waitingForWindow = false
    /// One permit per chunk the reader may produce. Reader thread waits; loop signals.
    private let credit = DispatchSemaphore(value: 0)
    /// Set when the client is gone or the server stops: the reader returns.
    private let cancelled = LockedValue(false)

    init(request: RecordingRequest, responder: HTTPResponder, loop: EventLoop, logger: Logger, databasePath: String,
         windowBytes: Int, chunkBytes: Int, onBuffered: @escaping (Int) -> Void,
         onEnd: @escaping (RecordingDownload) -> Void) {
        self.request = request
        self.loop = loop
        self.logger = logger
        self.databasePath = databasePath
        self.windowBytes = windowBytes
        self.chunkBytes = chunkBytes
        self.onBuffered = onBuffered
        self.onEnd = onEnd
        state = .planning(responder)
    }

    /// Bytes waiting in the stream for the client. Loop thread only.
    var bufferedBytes: Int {
        switch state {
        case .streaming(let stream): return stream.bufferedBytes
        case .planning, .ended: return 0
        }
    }

    /// Starts the reader thread. Loop thread only.
    func start() {
        loop.preconditionInEventLoop()
        let thread = Thread { [self] in read() }
        thread.name = "roomd-recording"
        thread.start()
    }

    // MARK: Reader thread

    private var isCancelled: Bool { cancelled.withLock { $0 } }

    /// Runs both passes on a connection of its own, handing chunks to the loop.
    private func read() {
        let db: SQLiteDatabase
        do {
            db = try SQLiteDatabase(path: databasePath)
        } catch {
            hop { $0.fail(error) }
            return
        }
        defer { db.close() }
        let writer = RecordingWriter(request: request, reads: EventReads(db: db))
        do {
            let plan = try writer.plan()
            guard hop({ $0.begin(plan) }), waitForCredit() else { return }
            let whole = try writer.frames(plan, chunkBytes: chunkBytes) { chunk in
                hop { $0.deliver(chunk) } && waitForCredit()
            }
            if whole { hop { $0.finish() } }
        } catch {
            hop { $0.fail(error) }
        }
    }

    /// Runs `body` on the loop; false when the loop no longer takes work.
    @discardableResult
    private func hop(_ body: @escaping @Sendable (RecordingDownload) -> Void) -> Bool {
        loop.execute { [self] in body(self) }
    }

    /// Waits until the loop grants the next chunk; false once cancelled.
    private func waitForCredit() -> Bool {
        while !isCancelled {
            if credit.wait(timeout: .now() + .seconds(1)) == .success { return !isCancelled }
        }
        return false
    }

    // MARK: Loop thread

    /// The first pass is done: sends the head (with `Content-Length`) and the header line.
    private func begin(_ plan: RecordingPlan) {
        guard case .planning(let responder) = state else { return }
        // Paced by `credit`, so the stream's own overflow limit is never the bound.
        guard let stream = responder.startStream(contentType: "application/x-ndjson", contentLength: plan.bodyLength,
                                                 maxBufferedBytes: Int.max) else {
            return end()
        }
        state = .streaming(stream)
        stream.onWritten = { [weak self] in self?.written() }
        stream.onClose = { [weak self] reason in
            guard let self else { return }
            if reason != .finished {
                logger.debug("recording download ended early", metadata: ["room": "\(request.room)", "why": "\(reason)"])
            }
            end()
        }
        deliver(plan.header)
    }

    /// Queues one chunk; grants the next one while the stream is within its window.
    private func deliver(_ chunk: [UInt8]) {
        guard case .streaming(let stream) = state, stream.isOpen else { return end() }
        stream.send(chunk)
        onBuffered(stream.bufferedBytes)
        if stream.bufferedBytes <= windowBytes {
            credit.signal()
        } else {
            waitingForWindow = true
        }
    }

    /// The socket took a piece: the reader may go on once the stream is back within its window.
    private func written() {
        guard case .streaming(let stream) = state, waitingForWindow, stream.bufferedBytes <= windowBytes else { return }
        waitingForWindow = false
        credit.signal()
    }

    private func finish() {
        guard case .streaming(let stream) = state else { return end() }
        stream.finish()
    }

    /// A read failed: 500 before the head, else the body stops short of its
    /// `Content-Length` (the client sees a truncated download, not a whole one).
    private func fail(_ error: any Error) {
        logger.error("recording download failed", metadata: ["room": "\(request.room)", "error": "\(error)"])
        switch state {
        case .planning(let responder):
            responder.respond(status: 500, text: #"{"code":1009500,"message":"recording could not be read"}"#)
            end()
        case .streaming(let stream):
            stream.finish()
        case .ended:
            break
        }
    }

    /// Cancels the reader and frees the slot (once).
    func end() {
        cancelled.withLock { $0 = true }
        credit.signal()
        switch state {
        case .planning, .streaming:
            state = .ended
            onEnd(self)
        case .ended:
            break
        }
    }
}
