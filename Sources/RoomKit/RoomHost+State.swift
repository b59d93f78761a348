import RoomKitLoop
import RoomKitProtocol

/// The engine's loop-side state: everything the host mutates while it runs.
/// `RoomHost` keeps it in a `LoopBound`, so every read and write checks it
/// is on the loop thread (NIO's `NIOLoopBoundBox`) instead of a comment
/// saying so; the properties below forward to it, so the engine's code
/// reads as before.
struct EngineState {
    var connection: (any EngineConnection)? = nil
    var link: ConnectionMachine
    /// Each room's session record, by room ID.
    var sessions: [String: SessionRecord] = [:]
    /// Requests waiting for their reply, by request ID.
    var pending: [Int64: PendingRequest] = [:]
    /// The IDs of pending requests with a deadline (a superset: answered
    /// ones leave at the next tick).
    var timedRequests: Set<Int64> = []
    /// Requests not yet sent (paced), from `outboxHead` on. Encoded when
    /// they leave: 300,000 resumes queued at a reconnect stay small here
    /// (their tokens shared with the sessions), and the encoding is spread
    /// over the loop turns that send them.
    var outbox: [(id: Int64, envelope: ClientEnvelope)] = []
    var outboxHead: Int = 0
    var nextRequestID: Int64 = 1
    /// The pacing bucket's tokens.
    var bucket: Double
    var lastRefill: UInt64 = 0
    /// Pacing in force: the configuration's until a hello reply advertises the bucket.
    var pacing: (burst: Double, perSecond: Double)
    var deadlines: DeadlineQueue<String> = DeadlineQueue<String>()
    var ticker: (any EngineTimer)? = nil
    /// When the engine's timer last ran (ms, monotonic): a longer gap than
    /// `RoomHost.stallAllowance` is a stall of the loop (`linkTick`).
    var lastTickAt: Int64? = nil
    /// Sessions whose cursor changed this loop turn (see `flushCursors`).
    var dirtyCursors: [SessionRecord] = []
    /// Whether the server confirmed batched messages on this connection
    /// (its hello reply said `"batch":true`): every later message is split
    /// at line feeds (`MessageBatch`).
    var receivesBatches: Bool = false
    /// Whether the push being applied belongs to a resume's replay.
    var applyingReplay: Bool = false
    var isShutDown: Bool = false
    var random: JitterGenerator
    /// The last login user's box, shared by the records that log in as it (`userBox(for:)`).
    var lastUserBox: LoginUserBox?
    /// The last login reply's decoded state and members (`LoginReply.scan`).
    var snapshotMemo = SnapshotMemo()

    init(link: ConnectionMachine, pacing: (burst: Double, perSecond: Double), jitterSeed: UInt64?) {
        self.link = link
        random = JitterGenerator(seed: jitterSeed)
        self.pacing = pacing
        bucket = pacing.burst
    }
}

extension RoomHost {
    var connection: (any EngineConnection)? {
        get { engine.value.connection }
        _modify { yield &engine.value.connection }
    }
    var link: ConnectionMachine {
        get { engine.value.link }
        _modify { yield &engine.value.link }
    }
    var receivesBatches: Bool {
        get { engine.value.receivesBatches }
        set { engine.value.receivesBatches = newValue }
    }
    var sessions: [String: SessionRecord] {
        get { engine.value.sessions }
        _modify { yield &engine.value.sessions }
    }
    var lastUserBox: LoginUserBox? {
        get { engine.value.lastUserBox }
        set { engine.value.lastUserBox = newValue }
    }
    var snapshotMemo: SnapshotMemo {
        get { engine.value.snapshotMemo }
        _modify { yield &engine.value.snapshotMemo }
    }
    var pending: [Int64: PendingRequest] {
        get { engine.value.pending }
        _modify { yield &engine.value.pending }
    }
    var timedRequests: Set<Int64> {
        get { engine.value.timedRequests }
        _modify { yield &engine.value.timedRequests }
    }
    var outbox: [(id: Int64, envelope: ClientEnvelope)] {
        get { engine.value.outbox }
        _modify { yield &engine.value.outbox }
    }
    var outboxHead: Int {
        get { engine.value.outboxHead }
        _modify { yield &engine.value.outboxHead }
    }
    var nextRequestID: Int64 {
        get { engine.value.nextRequestID }
        _modify { yield &engine.value.nextRequestID }
    }
    var bucket: Double {
        get { engine.value.bucket }
        _modify { yield &engine.value.bucket }
    }
    var lastRefill: UInt64 {
        get { engine.value.lastRefill }
        _modify { yield &engine.value.lastRefill }
    }
    var pacing: (burst: Double, perSecond: Double) {
        get { engine.value.pacing }
        _modify { yield &engine.value.pacing }
    }
    var deadlines: DeadlineQueue<String> {
        get { engine.value.deadlines }
        _modify { yield &engine.value.deadlines }
    }
    var ticker: (any EngineTimer)? {
        get { engine.value.ticker }
        _modify { yield &engine.value.ticker }
    }
    var lastTickAt: Int64? {
        get { engine.value.lastTickAt }
        _modify { yield &engine.value.lastTickAt }
    }
    var dirtyCursors: [SessionRecord] {
        get { engine.value.dirtyCursors }
        _modify { yield &engine.value.dirtyCursors }
    }
    var applyingReplay: Bool {
        get { engine.value.applyingReplay }
        _modify { yield &engine.value.applyingReplay }
    }
    var isShutDown: Bool {
        get { engine.value.isShutDown }
        _modify { yield &engine.value.isShutDown }
    }
    var random: JitterGenerator {
        get { engine.value.random }
        _modify { yield &engine.value.random }
    }
}
