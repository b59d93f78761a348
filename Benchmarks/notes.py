"""The prose of docs/BENCHMARKS.md: how each workload is measured, and what
limits us. Kept beside the code that measures, and re-rendered every run."""

METHOD = """\
## How each figure is taken

Every workload runs once per side, RoomKit first, then the Python peer,
then the NIO peer, each against a fresh `roomd` (release build of this
repository's `roomd`, same binary and flags for all) started by
`Benchmarks/bench.py` with raised per-connection
limits: `--rate-limit 1000000 --rate-limit-burst 1000000` (the default 200/s
token bucket would otherwise be the measurement) and `--max-outbound-bytes
1073741824` (a receiver that falls behind is buffered, not closed 1013),
and `--max-connections-per-ip 100000` (fan-out opens 1,001 connections from
one address).
RoomKit's client pacing is raised to match (`requestsPerSecond` and
`requestBurst` 1,000,000). All clients take the same options and print the
same JSON lines (`Benchmarks/.build/results.json` keeps them all).

- **Runs and spread.** The whole set of workloads runs `BENCH_RUNS` times
  (default 3; `BENCH_QUICK=1`: one, at smaller sizes), one run after the
  other, so a burst of load from elsewhere hits one run, not one side. Each
  figure is the median of its runs, with (min-max) when they differ; each
  ratio is taken within a run (RoomKit / peer, side by side) and then
  summarised the same way. `Benchmarks/.build/results.json` holds every run and
  `figures`: for each figure its workload, metric, unit, RoomKit's value
  and each peer's (`python`, `nio`; `redis` and `inline` where a row
  compares with those), each as median, min, max and the runs' values, the
  ratios, the target and the verdict.
- **Pinning.** With `taskset` and 2 or more CPUs (`BENCH_PIN=0` turns it
  off), the client under test (RoomKit, either peer, the raw or Redis sink)
  runs on CPU 1 and what it talks to (roomd, the
  sender of workloads 2 and 4, the firehose, redis-server and
  redis-benchmark) on CPU 0. Every client engine so gets one core of its
  own whatever its thread count (RoomKit: the loop thread and a queue per
  plugin; the NIO peer: one event-loop thread; the Python peer: one), and
  the server does not steal the client's core or the other way round. The
  machine is still shared with other builds (the "Shared" row), which the
  pinning cannot keep off either core. Workload 0's durable appends compare
  no sides, so roomd (loop thread and checkpointer) and its two senders
  run unpinned there; workloads 5 and 7 (in-process microbenchmarks) and 8
  (roombot and roomd) are not pinned either.
- **Regressions.** A figure on this page against the same figure on an
  older page does not tell whether code got slower: the machine is shared,
  and the same binary moves by half between days (revision 69d6436's
  client, 2.18 us per firehose event with 3 plugins on its own page, took
  3.1-5.7 us beside today's build on 2026-11-27). `make bench-ab
  BASE=<revision>` (`Benchmarks/ab.py`) builds the base revision's roomd
  and bench client in a worktree and runs the firehose (workload 6) and
  the logins (workload 1) with both builds, alternating, `AB_ROUNDS`
  rounds (default 6), and prints each side's median (min-max) and the
  median of the paired ratios head / base: that ratio is what says
  "regression" or not.
- **The peers.** *Python* (`Benchmarks/peers/roomkit_peer.py`): asyncio and
  the `websockets` library, stdlib `json`, handlers called inline. *NIO*
  (`Benchmarks/peers/nio-peer`, its own SwiftPM package so that it is never
  part of RoomKit's products): Swift 6 on SwiftNIO with Vapor's
  websocket-kit, one single-threaded `MultiThreadedEventLoopGroup` for all
  its connections, `Codable` messages through Foundation's `JSONDecoder`
  (decoded by `op`, so a magix push reads only its own keys; payloads and
  state into a `JSONValue` enum), requests with `JSONEncoder`, the same
  cache per room (state, members, streams, extra info, seq), the same
  pipelined logins (1,000 in flight per connection), full-jitter reconnects
  with resume, and 3 handler closures called inline (the third the probe).
  Its tokens are signed by the harness and handed over in a file (signing
  is in no figure; it keeps swift-crypto's second BoringSSL out of its
  build). It takes part in workloads 0 (service logins), 1 to 6; not in 7
  and 8. In 5, `nio-peer plugins` times its handler closures as
  `peer_plugins.py` times the Python peer's functions (a call, a
  JSONDecoder decode of the 75-byte message into `JSONValue` plus a call,
  a loop over 3 handlers).

- **0. roomd alone** (`Benchmarks/roomd_workloads.py`). *Durable appends*
  (roomd and the sender only, so no peer value): two
  `roomkit-bench send` processes, 5,000 `magix` requests in flight each, 100
  rooms each, flood a fresh roomd (raised request limits, storage as
  shipped: WAL, `synchronous=NORMAL`, group commit); appends/s = the
  senders' acknowledged requests per second, summed (each acknowledged event
  was committed before its reply); pushes are ~100 bytes (`{"event":"bench",
  "from":1,"op":"magix","payload":{"t":<ns>},"room":"a0-room-7","seq":…}`).
  roomd CPU per append = its utime+stime
  (all threads, checkpointer included) / appends. *Service logins*: one
  `RoomHost`, one connection with a `service` token (docs/PROTOCOL.md
  "Service connections"), N rooms, 1,000 logins in flight, against a roomd
  started with **no** limit flags; the engine paces to the bucket the hello
  reply advertises. Then `kill -9`, restart on the same data, and the time
  until every room is `RECONNECTED`. The peer does the same with its
  `--service 1` (the token in its hello, 1,000 requests in flight, under
  the advertised bucket).
- **Connections.** `RoomHost` keeps one connection per server, so RoomKit
  runs several `RoomHost` instances, all on one `EventLoop` thread; the
  Python peer opens the same number of `websockets` connections in one
  asyncio loop, the NIO peer in one event loop.
  Each connection multiplexes its rooms. Sessions: 8 connections. Event
  throughput: 4 connections in the same 100 rooms (so each room event
  reaches the process 4 times). Fan-out: one connection per member.
- **1. Idle sessions.** N sessions (N/8 distinct rooms per connection, one
  token for `room: "*"`), logins pipelined with at most 1,000 in flight per
  connection on both sides. Logins/s = N / time until the last `LOGINED`.
  Memory = (VmRSS after the logins and 1 s idle - VmRSS before the first
  login) / N, from `/proc/self/status`; the row "after malloc_trim" repeats
  it after glibc's `malloc_trim(0)` (and `gc.collect()` for the peer). Both
  keep the same per-room cache: state, members, streams, extra info, seq.
- **2. Event throughput.** `roomkit-bench send` (the same process for both
  sides: one raw connection, 1,000 `magix` requests in flight) floods the
  100 rooms for a few seconds. RoomKit: 3 C plugins on the `room` hook,
  loaded by `PluginManager` (each on its own serial queue with a watchdog);
  two are no-ops, the third (the probe, `Benchmarks/plugins/bench_noop.c`)
  counts magix events. The peer: 3 in-process handler functions, the third
  the same probe, called directly from the reader (no isolation). Events/s =
  events seen by the third plugin / (last - first). Then the sender runs at
  half that rate; dispatch latency = the probe's CLOCK_MONOTONIC minus the
  sender's stamp in the magix payload (sender -> roomd -> client engine ->
  plugin queue -> third plugin), summarised with HdrHistogram (3 significant
  digits; the peer's percentiles are exact ranks).
- **3. Recovery.** After the logins, `bench.py` sends `kill -9` to roomd and
  restarts it on the same port and data directory; both clients reconnect
  with full-jitter backoff (first retry within 1 s, doubling) and resume
  every session. Time = kill until the last `RECONNECTED`. Resume rate =
  sessions / the time in which resumes were completing (the 10 ms slices
  holding at least one `RECONNECTED`: the jittered reconnects of the 8
  connections leave idle gaps that are backoff, not work), compared with the
  same run's login rate.
- **4. roomd fan-out.** M member connections (one per member) in 200/M
  rooms (at least 2); the sender floods them; deliveries/s = magix pushes
  received by all members / (last - first). With RoomKit or peer members
  this measures roomd and the receiving engines together on 2 cores; a
  third run with raw members (`roomkit-bench sink`: RoomKitLoop WebSocket
  connections that count frames without parsing them) checks whether the
  members' engines are what limits the rate; during it roomd's own CPU per
  delivery is taken from /proc (utime+stime / deliveries), which is what
  roomd would need per delivery on a core of its own. *Redis anchor*
  (`Benchmarks/redis_anchor.py`, rooms of 100 only): redis-server 7 with
  persistence off, `redis-benchmark` publishing the text of a roomd magix
  push (96 bytes), 64 pipelined, on one connection, to 100 subscribers on
  one channel. The subscribers are `roomkit-bench redis-sink`: 100 hiredis
  connections (RoomKitRedis) on one RoomKitLoop event loop that count
  messages exactly as the raw members count roomd's frames, in one process
  on the same CPU: the same receiving side for both servers, so
  deliveries/s (messages received / (last - first)) compare, and the anchor
  row is roomd / Redis. Each server's CPU per delivery is shown too, and
  each sink's: when 1e6 / a sink's CPU per delivery is near its rate, the
  sink's core was full and that server's figure is a lower bound (the
  redis-sink needs ~0.5 us per delivery, so ~2M/s fills its core: Redis's
  1.6-2.0M/s here is close to that; roomd's sink, at ~1M/s and ~0.6 us, was
  not full). roomd
  also stores every event durably and checks every member's rights; Redis
  does neither. *Batched messages* (docs/PROTOCOL.md "Batched messages", an
  extension): a fourth run, `raw-batched`, uses the same sinks with
  `--batch 1`: their hello asks roomd to join what it sends a connection in
  one loop turn into one WebSocket message, and a sink counts each message
  as the pushes it holds (one more than its line feeds). The rows "to raw
  members asking for batched messages" are that run; the rows "to raw
  members" stay without batching, so they compare with earlier pages. The
  RoomKit members ask for batching (the engine's default,
  `RoomHostConfiguration.batchesMessages`; `roomkit-bench client --batch 0`
  turns it off); the Python and NIO peers do not know the extension and get
  one message per push.
- **5. Plugin overhead.** `plugin-bench`: a tight loop calling `on_room_event`
  through the descriptor's function pointer (C no-op plugin), and through the
  descriptor the Swift SDK exports (its trampoline decodes the payload JSON
  and calls the protocol method); best of 3 runs. Then PluginManager's whole
  path (payload encoding, room glob, the hop to the plugin's queue, watchdog,
  counters) through the public `dispatchPlayerEvent`, 3 plugins, wall time
  and process CPU time per hook call. The peer: a Python function call, and
  `json.loads` + call.
- **6. Client engine alone.** `roomkit-bench firehose`
  (`Benchmarks/Sources/RoomKitBench/Firehose.swift`): a release-built server
  on RoomKitLoop that answers hello and login (an empty snapshot) and, 1 s
  after the last login, pushes magix events into every room of the
  connection round-robin for a few seconds, keeping 1 MiB queued (each
  room's push is encoded once; only its seq digits are appended per push).
  One connection, 100 rooms, the same plugins as workload 2. Events/s =
  events seen by the third plugin / (last - first); CPU per event = the
  client process's CPU (all threads) / events. Nothing stores or fans out
  here, so the ratio is the client engines' own.
- **7. Plugin isolation.** `isolation-bench`
  (`Benchmarks/Sources/IsolationBench`): player events through
  `PluginManager.dispatchPlayerEvent` on the loop thread, 256 per loop
  callback, each callback its own loop turn (so each callback's events
  reach each plugin as one batch), to 1 and to 3 copies of the no-op C
  plugin, inline and `"isolation": "process"`, until every plugin finished
  every event: events/s, and the bot's CPU per event (the processes' own
  CPU apart). Then `urlInterrupter` round trips through one plugin, p50 and
  p99. Until 2026-11-27 (revision 86a4b5f) a turn ended only behind every
  callback already posted, so a run was one turn of nearly all its events;
  process / inline ratios on pages before that were measured so.
- **8. Bot restart.** RoomKit only (the peers keep no state across a
  restart). The release `roombot` joins N rooms from its `bot.json` against
  a roomd with its **default** settings but the heartbeat timeout (90 s,
  the default; a second run: 30 s), on one service connection (`bot.json`'s
  `serviceToken`, docs/CLI.md), idles 1 s, is killed with `kill -9`, and is
  started again at once with the same config and store
  (`bot.state.sqlite`). Time = from the second process's start until its
  event log holds N `LOGINED` lines (each resumed from the store;
  `recovered` counts those that recovered every missed event). Invisible =
  rooms whose own log (`GET /v1/rooms/{room}/recording?from=<kill time>`,
  the seq'd events every member receives) holds no `userUpdate` after the
  kill: the resumes are invisible while they finish inside the heartbeat
  timeout.
- **10. No-op python plugin over the wire.** RoomKit only
  (`Benchmarks/python_plugin_workload.py`). The bot's side of the plugin
  wire (docs/PLUGIN-WIRE.md) is played by the benchmark script, which
  spawns `Benchmarks/plugins/noop_plugin.py` (the `roomkit_plugin` SDK, a
  magix handler that does nothing) as roombot does (the socket on fd 3),
  does the handshake, and sends magix events in EVENTS frames of 1,024
  records built before the clock starts, at most 4 frames unfinished.
  Events/s = events / (first send until the DONE of the last record); every
  record is cut from the frame, its payload decoded and handed to the
  handler as the event-log dict. CPU per event is the plugin process's
  (utime+stime from /proc). Then a tenth as many events, one per EVENTS
  frame, 256 frames in flight (the SDK runs the frames it read together as
  one batch). The URL row: 2,000 sequential URL requests to the idle
  plugin, send to ANSWER."""

NOTES = """\
Profiled during development with `perf record -g` on this machine (the
figures in this section are from those profiles; the table above is from the
run itself). The machine was shared with other engineers' builds and tests,
so single figures move by +-30% between runs; the ratios move less.

**roombot itself at scale (issue #26, first section).** Measured with
`Benchmarks/roombot_scale.py` (`make scale-bot`): a release `roomd` as
shipped and a release `roombot` with a `serviceToken` and N rooms in
bot.json, then roomd kill -9 and a restart on the same data, on this
machine while other engineers' builds kept its load at 5-16 on 2 cores.
Before (revision 98d76bc): 100,000 rooms, 96,331 LOGINED after 120 s,
47,935 failed login attempts (timeouts, then "already logged in" for rooms
whose timed-out login had gone through, given up), 48,004 log lines, 8,675 B
of RSS per room (793 MB before the first login), progress "144,266 of
100,000 done"; 300,000 rooms, 8,543 LOGINED after 100 s, 299,546 failed
attempts, 288,914 log lines, 2.39 GB RSS. Where it came from: one task per
room put every login in the outbox at once and the login timeout ran while
a request waited its turn; every timed-out room retried on its own and
logged a line per attempt; the task group kept every finished child until
the end (most of the 8.7 KB); the progress line counted events. Now the
first logins go through a bounded pipeline (`JoinSchedule`: at most 1,024
outstanding and at most the advertised burst, one shared backoff per cause,
one log line per cause per interval); the engine keeps at most 1,024
requests on the wire, encodes them as they leave, looks only at requests
with a deadline on its tick, and credits a stall of its loop to the silence
clock; the minted token is shared by the rooms; the store keeps its cursors
in its file; roomd's sweep no longer copies every room's session table each
second (a quarter of roomd's CPU at 300k rooms). After: 100,000 rooms (revision c2443a1) all LOGINED in 20.5 s with 0
failed attempts and 21 log lines (progress only), and all back 30.6 s
after roomd's restart with 0 failed attempts and no log line. 300,000 rooms, measured again on 2026-11-27 with the
same script at load 7.4-7.8 on 2 cores (other engineers' builds; compare
CPU, not wall time), before and after this step's roomd, the same roombot:
before (revision 7f81a4c) all LOGINED in 116.7 s, 0 failed attempts, 116
log lines (all progress), bot RSS 1,210 B per room (346 MB), roomd 1,534 B
per session; after roomd kill -9 all RECONNECTED 208.3 s after the
restart, 0 failed attempts. CPU to join: the bot 31.4 s (105 us per
login), roomd 31.8 s (106 us per login). roomd's profile while logging in
(`perf record -g`, 20 s, some 50,000 sessions held): `login` 43% (the
fresh session 30%, `TokenSigner.verify` 6.6%, the reply with its snapshot
as a `JSON` tree 5.8%) and `sweep` 14.5%: each second it walked every
room's session table and ticked every session, about 0.7 us a session in
cache misses, so it grew with the sessions held (at 1,000,000, most of a
core): that is why roomd's CPU per login grew from ~120 us at 300,000 rooms
to ~370 us at 1,000,000. Now the sweep ticks only the sessions whose rules
may act by now (`SessionSchedule`: a slot per sweep period, filled after
every change of a session's rules; `sweep` is gone from the profile). After
(same load, with a debug build running beside it): all LOGINED in 102.8 s,
0 failed attempts, 102 log lines; roomd 22.2 s of CPU (74 us per login,
-30%), the bot 31.2 s (104 us, unchanged); bot RSS 1,198 B per room, roomd
1,584 B per session (+50 B: the schedule); after roomd kill -9 all
RECONNECTED 177.8 s after the restart, 0 failed attempts, 4 log lines (the
bot's reconnect backoff while roomd restored 300,000 rooms reached 10.8 s
between attempts). roombot kill -9 (`--kill-roombot`: the bot started
again on the same config and store). With the roomd before this step: at
30,000 rooms all resumed 20.5 s after the restart, 0 failed attempts; at
300,000 (after the roomd kill above) only 37,713 were back within 240 s,
with 4,981 failed attempts ("login timed out", aggregated: 107 log lines):
the new bot took ~20 s to its first resume (loading its store), resumed
~500 rooms/s, and 90 s after the kill roomd's heartbeat timeout made every
session not yet resumed leave in one sweep, after which resumes came a few
a second. With this step's roomd the same sequence did not stall in two
runs (not profiled, so not attributed): roombot kill alone at load 8.4, all
300,000 resumed 101.3 s after the restart; the whole sequence at load 5.9
(all LOGINED in 74.3 s, roomd 19.8 s of CPU or 66 us per login, the bot
28.0 s or 93 us; roomd kill -9, all RECONNECTED 84.6 s after the restart;
roombot kill -9, all resumed 58.9 s after its restart), each phase with 0
failed attempts and only progress lines (74, 3 and 51), bot RSS 1,213 B per
room, roomd 1,584 B per session. 1,000,000 rooms with this step's roomd (one run of the script, load
7.4-8.8, no kill phases for lack of time): all LOGINED in 437.7 s, 0 failed
attempts, 427 log lines (all progress), the first 503,110 within 210 s;
roomd 85.7 s of CPU (86 us per login, against ~370 us before: its cost per
login no longer grows with the rooms it holds), the bot 160.3 s (160 us per
login against 105 us at 300,000: the bot's cost now grows with its rooms,
the next profile to take there); bot RSS 1,107 B per room (1,056 MB; target
1 KiB), roomd 1,440 B per session (1,402 MB; target 1.5 KiB).
Of the 60 s targets only the roombot restart's was met, once, at load
5.9; the joins and roomd's restart miss them on this loaded machine. The
profiles then said: in roomd, `TokenSigner.verify` per login (7.7% at
1,000,000; one bot signs all its logins with one token) and the reply and
the empty room's snapshot built as `JSON` trees (6%); in the bot (105 us
per login), the event log's one write(2) per line (16% of the bot's
samples: LOGINING and LOGINED per room), `BotStore.save` and
`flushCursors` (9% each), the task hop per login ~6%. What this step did
(2026-11-27, revision 924b42f; no kill phases): the event log writes a loop
turn's lines with one write(2) at its end; roomd keeps the claims of the
tokens it verified (`VerifiedTokenCache`, `exp`/`nbf` checked on every
use); and `perf record -g` of the bot then showed what made its cost grow
with its rooms: 13% of its samples in reabstraction thunks of the closure
through which `BotStore.save` reads the event log's size. A closure stored
in the generic `LockedValue` and read through `withLock` was wrapped in two
more thunks on every read (`_modify` writes it back), so each save walked a
chain as long as the saves before it; the store now keeps it in a class.
300,000 rooms, the same minute, load 3.0-3.2 (a debug build of this
branch running beside; CPU figures move by +-30% between runs here, the
system-call counts do not): before (main's release build, revision
b204dde) all LOGINED in 53.1 s, the bot 28.1 s of CPU (94 us per login)
and 1,627,887 write-type system calls (5.4 per login; `syscw`, now in the
script's output), roomd 24.8 s (83 us); after, 38.2 s, the bot 25.6 s (85
us) and 132,048 write calls (0.44 per login), roomd 18.7 s (62 us); 0
failed attempts and only progress lines in both, bot RSS 1,199 / 1,209 B
per room, roomd 1,584 / 1,585 B per session. Three more runs before
(load 1.9-3.9) ranged 27.4-41.9 s of bot CPU and 24.3-35.6 s of roomd
CPU; four more after (load 1.2-3.4, two with `perf record` attached),
23.0-36.7 and 16.3-22.8 s (the 23.0 s and 16.3 s with the thunk fix, the
others without it). 1,000,000 rooms after (one run, load
up to 4.1): all LOGINED in 122.2 s (437.7 s before, at load 7.4-8.8), 0
failed attempts, 121 log lines (all progress); the bot 76.9 s of CPU (77
us per login, against 160 us: its cost per login no longer grows with its
rooms) and 437,345 write calls, roomd 55.3 s (55 us, against 86 us); bot
RSS 1,112 B per room (1,060 MB; target 1 KiB), roomd 1,445 B per session
(1,406 MB). The 60 s target is still missed at 1,000,000. Next, by the
profile of the bot after this step (300,000 rooms, 20 s): `loginAnswered`
20%, of it `flushCursors` into `BotStore.save` 10% (one SQLite
transaction per loop turn, a few logins each: batching them per interval
would change what a `kill -9` leaves, which BotRestartTests pin, so it is
not done), the event log's lines 10% (encoding, not the write: 0.7%),
retain/release and dictionary hashing 20% spread over the engine. In
roomd, the reply and snapshot as `JSON` trees (not done).
Then the stalled
roombot restart seen with the old roomd (to reproduce and profile), the
bot's RSS at 1,000,000 rooms, and roomd's restart, which loads each room
with two queries. A login that timed out after it reached the server left
a server session, so its retry got 1009007 and the room was given up
(fixed on 2026-11-27: the engine withdraws such a login).

**This run (2026-11-27 22:48, revision df1f266) against the previous
page (2026-11-27 19:50, revision cbb2975).** This step worked on issue
25's urlInterrupter round trip only; the other rows are the machine's.
*What changed.* A process plugin's URL step no longer passes through the
bot's queues: the caller's thread sends the request (never blocking on a
busy child: `PluginChild.sendSoon`), no thread waits for the ANSWER, and
the reader thread that reads it resumes the caller. A round trip is four
thread hand-offs instead of eight. *urlInterrupter*: p50 49.6 us (103 on
the previous page), p99 85.8 us (83.6-89.0; 176), the 100 us target met.
The new row beside it is the machine's floor for such a round trip: one
byte echoed by `/bin/cat` over a socket pair, two processes each woken
from sleep once, no RoomKit code: p50 52.9 us, p99 82.0 us. The URL
step now costs what its two processes' wake-ups cost. (A child whose
reader thread runs the URL hook itself when the main thread idles, one
hand-off less, and a caller that spins up to 50 us for the answer were
both measured and dropped: neither moved p50 or p99 beyond noise, and
the spin made both worse with three threads on two cores.) *Process
plugins*: 0.83x inline with 1 plugin (0.80-0.95; 0.79x on the previous
page, whose code this step did not change on that path), met; 0.80x
with 3; the bot's CPU per event per process plugin 166 ns (met). The
no-op Python plugin: 468,672 events/s (met). The million-room tier, in
run 1: all LOGINED in 35.1 s, back 41.1 s after a roomd kill -9,
resumed 41.6 s after a roombot kill -9, 862 B per room in the bot,
1,441 B per session in roomd (every target met).

**The run before (2026-11-27 19:50, revision cbb2975) against the previous
page (2026-11-27 16:50, revision c2dc571).** This step worked on issue
25's process plugins only; the other rows are the machine's, a new one
(its thread wake-ups cost more; read the ratios). *What changed, each
from a `perf` profile of isolation-bench by thread.* A loop turn's calls
are plain data (`TurnCall.room` is a place in the turn's list of rooms;
destroying a turn's calls, a release per call, was a tenth of the
plugin's queue); a journal record is reserved and written in place (no
closure per record); a flush gathers the frame headers and the records
where the journal keeps them into one `sendmsg` (`GatheredFrames`: the
copy of every record into a frame buffer is gone); `roomkit-plugin-host`
reads a record's fields in place (a call per field was half its main
thread) and hands the hook its room and payload in place, NUL-terminated
for the call. Copies of an event's payload, socket to the hook: 8 to 6.
*Process plugins*: 7,579,345 events/s against inline 10,529,964, 0.79x
(0.66-0.80; the page before: 0.64x), the 0.8x target missed by a
hundredth in the median run; with 3 plugins 0.80x (0.89x); the child's
CPU per event 45 ns (87), the bot's per event per process plugin 175 ns
(met). On this machine, at 1,000,000 events, the code of the previous
page gave 5.1-7.3M process events/s and this code 6.1-8.5M (the
child's CPU 53-93 ns against 37-76), in alternating development runs.
*urlInterrupter* p99 176 us (missed; 66.9 on the previous page): the
previous page's code gives the same on this machine (p50 ~118 us, p99
~215 us in development runs), and a profile of the URL phase is nearly all
context switches (`finish_task_switch`); a round trip crosses eight
thread hand-offs. The million-room tier, in run 1: all LOGINED in 38.5 s,
back 44.1 s after a roomd kill -9, resumed 44.4 s after a roombot
kill -9, 863 B per room in the bot, 1,441 B per session in roomd (every
target met).

**The run before (2026-11-27 16:50, revision c2dc571) against the previous
page (2026-11-27 13:17, revision 4833aa3).** This step worked on issue
26's million rooms only, both sides of it; the other rows are the
machine's. *What changed, each from a `perf` profile at 300,000 or
1,000,000 rooms.* The bot: login replies are read by a scanner
(`LoginReply.scan`, on the magix scans' walker), and the last decoded
state and members are kept with their text (`SnapshotMemo`), so a
million rooms that all start from the initial state with the bot as
their member decode it once and share it (the parse and decode were 20%
of the loop; RSS per room at 300,000 went from 1,067 B to 934 B); its
logins leave in batches of 64 (`RoomHost.loginRooms`: a task, a
continuation and a loop hop per room were a fifth of its CPU, on the
cooperative pool's threads); the store keeps the last row's user and
snapshot with their text and fingerprint (a million first saves hashed
and encoded the same pair, a restarted bot parsed it a million times);
and the metrics keep a room's place in the session gauges in its record,
not in two dictionaries of a million entries. roomd: login requests are
scanned (`ClientEnvelope.scanLogin`); a member's join or leave is
applied as its typed body with its push written from the members (the
push built as a tree, serialised and decoded back was a sixth of its
loop per login); the statements of a login are kept prepared (each was
looked up by a hash of its SQL), a new room is one INSERT with no
savepoint around it, session IDs take their random half from a pool (a
getrandom call per login, 2.4%), and a session is saved with an upsert
(INSERT OR REPLACE deleted the row and inserted it again under a new
rowid; a restarted roomd saves every session it resumes: its CPU for
300,000 resumes went from 12.7-16.0 s to 8.8-9.0 s). At 300,000 rooms
alone on the machine: LOGINED in 15.2 s against 18.6-24 s, the bot's CPU
11.9 s against 16.8-17.9 s, roomd's 10.0 s against 11.5-15.2 s. *The million*, in this run (run 1, beside the TSan
tests at nice 19): all LOGINED in 49.2 s, back 51.9 s after a roomd
kill -9, resumed 56.3 s after a roombot kill -9, 0 failed attempts, the
bot's CPU to join 41.9 s (73.7 s on the previous page), RSS 836 B per
room in the bot and 1,441 B per session in roomd: every target of the
tier met. Alone on the machine during development (16:26,
`roombot_scale.py --kill-roomd --kill-roombot`): 40.7 s, 43.3 s and
44.4 s. What is left, by profile: a fresh login on roomd is still three
B-tree inserts (room, event, session) and their WAL pages; a restart
restores room by room (four queries and a JSON parse per event per
room: about 16 s of a million-room restart); the bot's `emit` (five
event-log lines per login) is the largest part of its loop. The rows this
step did not touch came out as the machine's: durable appends 86,702/s
(missed), the client's CPU per firehose event 2.98 us (missed), the
amortised hook 287 ns (missed), p99 at half load 26.5 ms (missed),
process plugins 0.64x inline (missed).

**The run before (2026-11-27 13:17, revision 4833aa3) against the previous
page (2026-11-27 09:50, revision efd0254).** This step worked on issue
26's million rooms only; the other rows are the machine's (it was slower
than on the previous page: roombot at 300,000 rooms took 18.1 s of CPU
here and 14-23 s in same-binary runs during the day). *What changed.*
A profile of roombot logging in 300,000 rooms put `emit` at 21% of its
loop (five events per login, each line built through a dictionary),
the login reply parsed and the stored snapshot re-serialized through
`JSON` trees (about 17% and 7%), and roomd's reply built and serialized
as a tree (about 15% of roomd). Now the login's events write their
members from their fields straight into the log's pending bytes, events
are counted by kind, roomd's login reply, the bot's stored snapshot and
the bot's logins are written straight as text (`RoomState+Write.swift`),
a resume that recovered everything in the same session writes nothing
to the store (after a roomd restart each was an UPDATE of a random row:
page reads and WAL page writes were a fifth of the bot's loop), a
restarted bot's store decodes a cursor when its room logs in (opening
decoded every row to fingerprint it: a fifth of a restarted bot's CPU),
roomd restores in one read transaction (each statement took the WAL
read lock on its own: fcntl was 12% of its start; 6.9 s to listening
at 300,000 sessions, now 5.3 s), and the connection's reconnect backoff
stops doubling at 4 s (`connectionBackoffCap`): with the rooms' 30 s
cap the bot reached a restarted roomd up to 16 s after it listened.
Same-minute A/B at 300,000 rooms (base 3f052df, 3 rounds alternating):
LOGINED 28.97/28.43/24.55 s against 24.49/22.66/18.6 s, the bot's CPU
after a roomd kill -9 13.5-19.4 s against 8.4-8.8 s. *The million.*
In this run: all LOGINED in 79.4 s, back 82.3 s after a roomd kill -9,
resumed 93.9 s after a roombot kill -9, 0 failed attempts, the bot's
CPU to join 73.7 s, RSS 944 B per room (met) and roomd 1,437 B per
session (met); the three 60 s targets missed. The same code alone on
the machine at 13:09 (`roombot_scale.py --kill-roomd --kill-roombot`):
68.2 s, 63.7 s and 76.3 s, the bot's CPU 63.1 s (a run of the code
before this step at 12:52: 71.6 s, 84.8 s, 101.3 s, 66.8 s). What is
left, by the profile of the bot at 1,000,000 rooms (30 s mid-login):
the login reply parsed into a `JSON` tree and decoded 17%, `emit` 16%
(of it 6% `RoomHostMetrics`' per-room dictionaries of reason and start
time, a million entries each, cache misses), the login tasks on the
cooperative pool 11% (other threads), `BotStore.save` 7%. After a roomd
kill -9 at 300,000 rooms: 3 s of RECONNECTING on the bot's loop, 5 s of
roomd's restore (each room's events parsed and applied one room at a
time, three queries per room), then 12 s of resumes; after a roombot
kill -9, `cursor(room:)` (a SELECT and two JSON parses per room) is 13%
of the bot. Next: the login reply read by a scanner like magix pushes',
the metrics' per-room state kept in the session record, roomd's restore
in bulk queries, and a stored cursor's snapshot kept as the text the
server sent.

**The run before (2026-11-27 09:50, revision efd0254) against the previous
page (2026-11-27 06:54, revision ecd9481).** Runs 1 and 2 had a quiet
machine (see "Shared"), and the peers ran faster than on the previous page
(the Python peer took 8.48 us per firehose event, 11.23 there): read the
ratios first, and the rows this step did not touch as the machine's.
*Process plugins (issue 25).* A profile of isolation-bench, by thread,
showed the process row serial: the loop ran ahead of the plugin's queue,
the runtime drained every turn queued by then as one batch (2,977,984
events in one `deliver`), and the journal encoded all of it (1.5 GB; page
faults were 40% of the queue thread) before its first write, so the child
sat idle until the end. Now a batch is journaled and written 1,024
records at a time; each record is written in place into the journal's
chunks (five generic Array appends of raw bytes per record, which Swift
copies byte by byte, before); finished records are counted where they
are (no copy into a second array); the journal's lock-guarded fields skip
Swift's dynamic exclusivity check (~12% of the queue thread); a send
copies each run of adjacent records at once; the child stamps its
progress page with the coarse clock (two CLOCK_MONOTONIC reads per record
were 63% of its CPU on this machine) and reads a record's strings into
two kept buffers; and dispatch touches no shared reference count per
event (a target's runtime is unretained, the loop check compares the
loop's identity: the loop thread spent 60% of its samples in
retain/release, the counts shared with the plugin's queue and with every
thread posting to the loop). Workload 7 itself changed (method above):
each 256-event callback is now its own turn, as its description said,
which makes inline much faster (the loop and the plugin's queue now
overlap), so its ratio is not comparable with earlier pages. Process
5,863,726 events/s against inline 8,630,708: 0.70x (0.58-0.72; with 3
plugins 0.76x), the 0.8x target missed; the bot's CPU per event per
process plugin 227 ns (641; <= 1,000 met), urlInterrupter p99 72.6 us
(91.6; met), the Python plugin 325,182 events/s (met). What is left, by
thread (isolation-bench, process, one plugin, ~5.9M events/s): both cores
are full; the loop thread ~95% of one (the same work as inline), the
plugin's queue ~50% (the record writes, the frame copy, a wake of the
child per turn), the child ~35% (parse and call, and its reader thread),
the bot's reader ~15% (counting DONE). Next: the records written to the
socket from the chunks (`writev`: copy 4 of ARCHITECTURE's count goes),
`TurnCall` as plain data (the queue destroys a room string per call), and
fewer wakes per turn. *Memory per room.* `SessionRecord` 328 -> 216 bytes
(fields ordered for size, sentinels for three optional integers, the
login user shared) and `Room` 232 -> 216: roombot at 1,000,000 rooms
961 B of RSS per room (1,110; the 1 KiB target met), at 300,000 1,057 B
(1,197). *Scale.* 1,000,000 rooms LOGINED in 74.2 s (102), back 80.7 s
after a roomd kill -9 (120) and 80.2 s after a roombot kill -9 (125), 0
failed attempts, the bot's CPU to join 69.6 s (95.8): the 60 s targets
still missed; 300,000 rooms in 22.2 s and back in 24.6 s (30.6, 32.4).
Not changed by this step, the quiet machine's: durable appends 110,291/s
(69,472; 9.5 us of roomd CPU per append against 15.3; the 100,000 target
met in this run, as in the quiet run 1 of 2026-11-27 00:55), p99 dispatch
latency at half load 28.6 ms (110.6; the engine alone 19.2 ms), the
client's CPU per firehose event with 3 plugins 3.27 us (3.98; 0.41x the
Python peer) and the amortised inline hook 568 ns (693), these three
targets missed.

**The run before (2026-11-27 06:54, revision ecd9481) against the previous
page (2026-11-27 03:32, revision 7923bbf).** Run 1 had a quiet machine (a
clean-clone CI run ended a minute before it); run 2 began right after
run 1's million-room tier; run 3 ran beside two sanitizer builds at nice
19 from 07:36. The same Python peer took 11.23 us per firehose event
(about 8.7 on the previous page), so read the ratios and the A/B below.
*No regression against the 2026-11-26 page, by A/B*: `make bench-ab
BASE=69d6436` (that page's revision), 8 rounds alternating, 06:21-06:27,
on this run's inline path (revision 1f13fee): head / base, paired
medians, client CPU per firehose event with 3 plugins 0.91x (0.65-1.30),
with no plugin 1.02x, the amortised hook 0.86x, logins/s at 100,000
rooms 1.04x (0.86-1.33). The base binary itself took 3.1-5.7 us per
event there, 2.18 us on its own page: the hook row's 259 ns of that page
against this page's 693 ns (438-899) is the machine, not the code.
What this step changed: an event whose only encoded observer is the
plugin manager has its fields written straight into the turn's buffer;
inline batches read their calls in place and the watchdog's outstanding
calls are a range of numbers; a process plugin's journal keeps its
records in 64 KiB chunks (no array per record, nothing moved, chunks
released as their records finish) and a flush sends about 1 MiB at a
time from one kept buffer. Process plugins: 1,358,399 events/s
(1,237,673), inline 2,887,930 (2,696,725), so 0.47x (0.46x; the 0.8x
target missed), the bot's CPU per event per process plugin 641 ns (788;
<= 1,000 met), urlInterrupter p99 91.6 us (met); a no-op Python plugin
366,427 events/s (262,928). Found by this run and fixed after it: a
shared hop for `dispatchPlayerEvent`'s two doors (23cd463) made its
write closure escaping, so each call from off the loop allocated a
second closure; `PluginManager`'s C hook path (workload 5, 200,000 calls
from the main thread) went from 304 to 437 ns of wall time (558 to 793
of CPU). 1e51563 reverts it: plugin-bench on the final revision
(99f69eb), 3 runs after the full run, 333-356 ns of wall time and 546-594
of CPU. The p99 dispatch latency at half load read 110.6 ms (24.1-116.1)
against 18.6 (13.5-36.4), with the engine alone (no plugin) unchanged at
20.2 ms (22.1); run 1, on the quiet machine, 24.1 ms. The A/B says it is
not the code: `AB_WORKLOADS=latency AB_ROUNDS=4 make bench-ab
BASE=c9d53ab` (this step's start; each build's client against the same
roomd), 08:22-08:24 on a quiet machine, head 99f69eb / base: p99 0.73x
(0.55-0.81; 15.5 ms against 24.5), p50 0.77x (2.4 ms against 3.5). At scale:
1,000,000 rooms LOGINED in 102 s (111), back 120 s after a roomd kill -9
(138) and 125 s after a roombot kill -9 (135), 0 failed attempts, bot
1,110 B per room (1,101; target 1 KiB), roomd 1,441 B; 300,000 rooms in
30.6 s and back in 32.4 s (both <= 60 s), 1,197 B per room. Durable
appends 69,472/s (76,505; 15.3 us of CPU per append against 13.8). The
1009007 after a timed-out login (the helper's paragraph above) is fixed:
the engine withdraws such a login (a logout follows it on the same
connection) and drops its late answer.

**The run before (2026-11-27 03:32, revision 7923bbf) against the previous
page (2026-11-27 00:55, revision b204dde).** Runs 1 and 2 had a quiet
machine, so the medians are quieter figures than the previous page's
(read its "Shared" row: most of its medians were loaded); compare the
ratios to the peers first. The inline plugin path: the amortised inline
hook under load 471 ns (417-692) against 1,286 (810-1,394), and the client's
CPU per firehose event with 3 plugins 3.21 us against 5.79 (0.37x the
Python peer, 0.54x before); through `PluginManager` one C hook call costs
304 ns of wall time against 1,045. What did it: a loop turn's calls reach
a plugin as the array dispatch filled (`PluginRoomEvents`, the turn's
shared buffer and its calls: no per-call `PluginRoomEvent` with its three
retains), the dispatch latency counts by each event's number in its turn
(`TurnDone`: arrays, no dictionary), a batch's calls per room are counted
per run of one room under one lock, hook tables are indexed by the hook's
slot (a `PluginHookKind` dictionary key hashed its raw String per call),
and dispatch walks its targets in place (a `DispatchTarget` copy per
plugin per event retained the runtime through its side table). Still
above the page of 2026-11-26 (259 ns, 2.18 us per event, 0.31x Python),
so issue 29's "no regression" is not met on this row; a profile of the
firehose client now (`perf record -g`, 5 s, 3 plugins) puts the plugin
threads at ~12% of the client's samples (was ~19%) and the dispatch on the
loop at ~13%, of which the event's one encoding is the most
(`EventEncoding.members`, ~8%: its members are written into an array of
their own, then copied into the turn's buffer; before the one-encoding
rule the payload was written into the turn's buffer directly). Next:
write the members straight into the turn's buffer when a plugin is the
first sink, and let a later sink of the same raise copy them from there.
Process plugins: player events now take the room events' route (the loop
turn's batch; isolation-bench dispatches them on the loop, 256 per loop
callback, and waits for the loop before it counts), so one no-op C
plugin in a process runs at 1,237,673 events/s against 775,709, and the
bot's CPU per event per process plugin is 788 ns against 1,759 (the
<= 1,000 ns target met); but inline gained more (2,696,725 against
914,729), so process / inline is 0.46x (0.43-0.46), the 0.8x target
missed further. What a process plugin's event costs the bot now
(`perf record -g` of isolation-bench, process only): the journal (each
record its own array, kept until DONE, copied into `uncounted` at trim:
~25% with `Entry` copies and releases), the EVENTS frames built from it
(~19%), and page faults from the journal's growth while 1,000,000 events
are posted at once (~25%: a burst the child cannot keep up with; a
steady rate would not grow it). Next: the journal as one byte buffer
with an index of offsets, counted at trim without the copy. roombot at
scale (the helper's paragraph above): 300,000 rooms LOGINED in 28.2 s
(34.5) and back 26.7 s after a roomd kill -9 (43.3); 1,000,000 rooms
LOGINED in 111 s (221), back 138 s after a roomd kill -9 (248) and 135 s
after a roombot kill -9 (143), all with 0 failed attempts; bot RSS 1,101 B
per room (target 1 KiB, missed), roomd 1,445 B per session (met). Not
changed by this step and flat: room logins per second of the engine's
client (13,240/s against 13,023; 21,758 on 2026-11-26, still not
attributed), durable appends (76,505/s against 88,010; CPU per append 13.8
us against 11.5: run 2 was the slow one, 57,526/s), p99 dispatch latency
at half load 18.6 ms (35.6 ms; 21.7 ms on 2026-11-26).

**The run before (2026-11-27 00:55) against the page before it (2026-11-26 12:44,
revision 69d6436).** Read the "Shared" row first: only run 1's first
workloads had a quiet machine; a clean-clone CI run and then both
sanitizer halves ran beside the rest, so most medians are loaded figures
and the peers slowed with us (Python peer service logins 9,139-10,266/s
against 12,591). What improved beyond that noise: roomd's CPU per durable
append 24.1 -> 11.5 us (106,848 appends/s in the quiet run 1, the 100,000
target met there, 88,010 the median); roomd's CPU per delivery to batching
members 0.41 / 0.31 us in rooms of 100 / 1,000, within 2x Redis's 0.27-0.31
(the unowned session link and the per-connection batch; without batching
0.92 / 0.81, under the 1 us row's target now); roombot itself joins
300,000 rooms in 34.5 s and is back 43.3 s after a roomd kill -9 (both
<= 60 s) at 1,212 B per room; process plugins: urlInterrupter p99 89.6
us and a no-op Python plugin at 255,581 events/s (both targets met), but
one no-op C plugin in a process at 0.70x inline (0.64-0.99; the table's
"met" is the verdict of the run with the median rate, whose ratio was
0.99x: by the median ratio the 0.8x target is missed) and 1,759 ns of bot
CPU per event per process plugin (1,021 in the quiet run: missed). What got worse, and is not only the load:
the client's CPU per firehose event with 3 inline plugins, 2.18 us on the
previous page, was 3.98 us in the quiet run 1 (1.56 us with no plugin, as
before): the amortised inline hook went from 259 ns to ~800 ns. A profile
of that workload (`perf record -g` of roomkit-bench, 3 s) puts the new cost
in per-call bookkeeping added since the previous page: the exact dispatch
latency's `TurnDone.finished`, a dictionary lookup per event (~5% of
samples with its hashing), the per-room call counter's `Tally.count`, a
String- and hook-keyed dictionary per call (~3%), and a clock read per call
in the runtime's run loop (~3%), plus their retains. Next: keep those per
turn in arrays indexed by plugin and room slot instead of dictionaries, and
read the clock once per batch. Room logins per second of the engine's
client also fell (13,023/s against 21,758; 15,783/s in the quiet run 1's
idle sessions at 100,000 against 21,954), with roomd at 72-92 us of CPU per
login in an A/B taken under load (batching on or off, commit deadline 10 ms
or 1 s made no difference); not attributed yet.

**The run before (2026-11-26) against the page before it (2026-11-23).** The machine was
slower this time for everything, ours or not: the same `redis-server`
needed 0.24 us of CPU per delivery (0.14 on the previous page), the Python
peer 7.19 us per firehose event (5.21) and the NIO peer 8.27 (6.34). So
absolute figures of roomd, which changed little since, moved with it:
durable appends 44,738/s (57,322), roomd CPU per delivery to raw members
1.30 / 1.24 us in rooms of 100 / 1,000 (0.93 / 0.91, then under the 1 us
target; now over it), while roomd's CPU per delivery against Redis's is the
same ratio as before (0.17x; 0.16x). The client is where this page's work
went, and its ratios moved: CPU per event against the firehose 0.31x the
Python peer (0.87x) and 2.18 us (4.56 on the previous page's rows, ~4.0
after the dispatch rework merged after it); receiving CPU per fan-out
delivery 0.18x the peers (0.45x); events/s through 3 plugins on the
firehose 3.3x the Python peer (1.45x); RSS per idle session at 100,000
0.43x the Python peer (0.60x), 1,279 bytes (1,799). Client CPU per login
rose like the NIO peer's (RoomKit / NIO 0.58x, 0.59x before): Swift code
slowed more than the Python interpreter on this machine today (NIO /
Python per login 0.78x, 0.62x before), which is why RoomKit / Python per
login moved from 0.38x to 0.45x and logins/s from 2.32x to 1.85x. Recovery
after kill -9 took 1.54 s (1.02): its resume rate equals the Python peer's
(1.00x; 0.82x before), and the rest is full-jitter backoff, which spreads
the reconnects at random. Against the NIO peer, measured the same way in
the same run, no client ratio got worse; the ratios are the figures to
compare.

**roomd's storage path (issue 17).** Group commit (docs/PROTOCOL.md
"Durability"): one SQLite transaction per loop turn, every reply and push of
the turn held until it commits. Before it, each event was its own
transaction (13,534 appends/s in the previous run of this page). Two more
changes were needed for the batches to be large: libwebsockets read 4 KiB
per socket per turn (`pt_serv_buf_size`), so a turn held ~40 requests of a
pipelining client; roomd now reads 256 KiB. And SQLite's default 2 MiB page
cache spilled dirty pages of a large transaction into the WAL before the
commit wrote them again; roomd keeps 64 MiB. Measured with `perf stat` on
roomd under 2 x 5,000 requests in flight: ~1,400 pipelined events per
commit (67 commits in 2 s), ~1.8 `pwrite`s per event (WAL frame headers and
pages, plus the checkpointer's copies: the 200 rooms put each commit's
events on ~400 distinct B-tree leaves), 16 to 19 us of roomd CPU per append
(all threads). `perf record -g` of the same: 92% of the samples on the loop
thread, 8% on the checkpointer (its `fdatasync`s and page copies). Of the
loop thread: ~25% SQLite in user space (`sqlite3BtreeIndexMoveto` and
`memcmp` on the (room, seq) and (room, ts) keys, VDBE), ~20% `pwrite`s of
WAL frames (ext4 buffered writes), ~20% request handling in Swift (JSON
parse of the request, envelope decode, building and serialising the push
and the reply: several `[String: JSON]` dictionaries per event, hashing,
retain/release), ~12% `send` of the replies (one syscall per frame: lws
writes one frame per `lws_write`), malloc/free ~6%. What would close the
rest of the way to 100,000/s on this machine: a lighter request path (decode
`magix` straight from the bytes, serialise the push and the reply with a
byte template instead of `JSON` trees: ~20% of the samples), one key per
event (drop the (room, ts) index and find recording times by seq through
the snapshot rows' ts, which are monotonic per room: ~1/3 of the B-tree work
and WAL frames), and coalesced frames per connection (below). The appends
rows above also carry the two senders' own cost: they share the 2 cores
with roomd.

**roomd's append path (issue 26).** Not yet in a full run of this page;
measured on one roomd under workload 0's load (2 x 5,000 magix in flight),
the old and the new release binary alternately within a few minutes, on a
machine shared with other engineers' builds (load average 7 to 18 on 2
cores). The senders share the cores, so appends/s vary a lot; roomd's CPU
per append (utime + stime, all threads) is the figure compared. Two rounds
at load 3: before, 28.4 and 36.7 us (32,057 and 23,516 appends/s); after,
with the group commit closing only at the end of a turn (`--commit-deadline
1`), 14.2 and 13.3 us (56,184 and 33,900/s); with a 1 ms deadline
(the issue's hint), 23.4 and 23.9 us (34,646 and 32,093/s); 10 ms (hence
the default): 16.8 and 17.2 us, 5 ms: 18.8 and 19.9 us. Each deadline commit writes the dirty
B-tree leaves of its rooms to the WAL again, so small commits cost page
writes per event. `perf record
-g` before: of roomd's samples ~40% Swift (the request in `received` 38%:
`JSON.parse` of the request 6.5%, `ClientEnvelope.decode` 2.4%, the push
as a `JSON` tree and its serialisation ~8%, a copy of the room model per
event, dictionary hashing ~5%, retain/release ~8%), 23% SQLite in user
space, 19% kernel (`pwrite` of WAL frames 9%, the checkpointer's
`fdatasync` 3%), 15% libc (malloc, memcpy, memcmp). Changes: a magix
request is read from its bytes (`ClientEnvelope.scanMagix`; anything
unusual goes to the full decoder) and its push and reply are written from
templates with sorted keys; magix no longer copies or applies the room
model; a lone event insert runs without a savepoint and with its statement
held, not looked up by its SQL; one key per event (the (room, ts) index is
dropped: a room's times never decrease along its seq, and recording slices
count by binary search on seq); the commit no longer rewrites `rooms.seq`
for every room of the turn; and the push is stored as the bytes members
receive, which a recording writes with `t` spliced in (no parse and
re-serialisation per frame; schema 1, older databases migrated in place).
After (deadline off): Swift ~28% of roomd's samples (the request in
`received` 26%, of it `scanMagix` 2%, the store insert 2%, three latency
histograms per append ~5% with their lock and clock reads), SQLite 25%,
kernel 29% (`pwrite` 14%, `send` of the replies 3%, `fdatasync` 4%). The
deadline commit releases a slice's replies and pushes at once, but
libwebsockets writes them when the connection is next writable, after the
turn; making the turn itself end at the deadline (pausing reads with
`lws_rx_flow_control`) is the step that would bound p99 by it, and is not
done. What would go next for 100,000/s: that, the per-append histograms
sampled or batched per turn, and coalesced reply frames per connection
(one `send` per reply today).

**Logins.** A login is a room row, a member event and a session row, all
in the turn's transaction; the reply carries the snapshot. Two changes made
here: a new room no longer stores its seq-0 snapshot (the empty model,
which restore and recordings assume when there is none), and session IDs
begin with their creation time (`s-<12 hex ms><random>`), so the sessions
table grows at its right edge instead of every login dirtying a random
B-tree page. roomd: ~34 -> ~27 us of CPU per login (`perf` before the
second change: ~30% SQLite in user space and `pwrite`, ~25% Swift in
`login`: the snapshot and reply as `JSON` trees, `TokenSigner.verify` 3%;
`sweep` 2%: it walks every session once per tick). Client: ~27 us per
login with 1,000 in flight. With 20,000 in flight the client spent 43% of
its CPU in the Swift runtime's `TaskGroup.removeChildTask` (a linear walk
over the group's children, so quadratic in the tasks in flight): the
harness keeps 1,000 in flight per connection. What would take roomd
further: the reply and the empty room's snapshot serialised from a
template, the token's verification cached per token string (one bot signs
all its logins with one token), and a sweep driven by a deadline queue
instead of a walk (done since: `SessionSchedule`, "roombot itself at
scale" below).

**roomd's fan-out.** Each push is encoded once per event (one
`WebSocketFrame` shared by every member, checked). Frames queued on one
connection are now written corked (`TCP_CORK`, released at the end of the
writable callback), and the per-frame `poll()` of `lws_send_pipe_choked` is
replaced by `lws_partial_buffered` (no syscall): fewer TCP segments and one
syscall less per delivery. Still one `send` per frame: libwebsockets 4.1
frames one message per `lws_write`, and hand-writing frames is not allowed
here, so coalescing several frames into one write needs an lws with
`LWS_WRITE_BUFLIST`-style batching or another WebSocket layer. And a send
no longer asks lws for a writable callback when the queue already has one
coming: one request per burst instead of one per delivery (raw fan-out to
100 members ~570,000 -> ~940,000 deliveries/s on this machine). roomd's CPU
per delivery is the figure to read for roomd; against Redis (anchor rows)
the gap is the per-frame `send` and the WebSocket framing: Redis writes a
client's whole output buffer with one `write` per event-loop turn. In this
run the anchor was 0.47x on deliveries/s (0.42-0.54 over the runs; 0.50x
on the previous page) and roomd's CPU per delivery over 1 us (1.30 / 1.24
us in rooms of 100 / 1,000) on a machine on which Redis itself needed 70%
more CPU per delivery than before (see the first paragraph). What would
close both: one `write` per connection per loop turn, as Redis does, which
libwebsockets 4.1 does not offer for WebSocket frames (one frame per
`lws_write`), so it needs an lws with batched writes or another WebSocket
layer; every other per-delivery cost is already once per event.

**Batched messages (issue 26).** That one write per connection per loop
turn is now there for clients that ask, without an lws that batches writes
and without hand-written framing: a `room.v1` extension (docs/PROTOCOL.md
"Batched messages") lets a client's hello ask for it, and roomd then joins
everything it would send that connection in one turn (after the group
commit released it) into one text message, newline-delimited, that lws
frames as usual (`PushBatcher.swift`, `WebSocketFrame(joining:)`). Measured
on this machine, release build, roomd pinned to CPU 0 with the sender and
the raw sinks on CPU 1 (the bench's layout; `Benchmarks/.build/release`
roomd and `roomkit-bench sink` / `send --window 200`, 4 s per run, runs of
the two kinds interleaved in the same minutes, roomd CPU from /proc
utime+stime / pushes the sinks counted), with one roomd binary, the sinks
asking or not: roomd CPU per delivery in rooms of 100 1.28 us (1.22-1.78,
3 runs) without batching -> 0.85 us (0.74-0.89) with it; in rooms of 1,000
1.34 (1.30-1.38, 2 runs) -> 0.74 (0.71-0.77). `perf stat` of roomd's
`sendto` calls over 3.6 s of the rooms-of-100 load: 969,804 without
batching (one per push), 56,511 with it (~69 pushes per message). A quick
bench run (`BENCH_QUICK=1 bench.py fanout`, loaded machine, before the
join below was made non-generic) gave 1.46 -> 1.10 us in rooms of 100 and
Redis 0.33 us per delivery, so the issue's target (<= 2x Redis's CPU per
delivery) was 0.67 us in that run: batching moves roomd from 0.23x to about
0.4x Redis per core, still short of 0.5x. Where the rest goes (`perf record
-g` of roomd with batching, rooms of 100): ~53% of the samples are Swift
reference counting, almost all on its slow path (`doDecrementSlow`,
`incrementSlow`, `swift_weakLoadStrong`): `ServerSession.link` is weak, so
every `ClientLink` has a side table and every retain and release of one
goes through it, and the fan-out retains each recipient's link several
times per push (the weak load in `append`, the group commit's `HeldSend`,
its copy when the held list is released). `memmove` (the join), the kernel's
`_copy_from_iter` and `tcp_sendmsg` are 2%, 2% and under 1%: the write
itself is no longer the cost. Next step: a link reference without a side
table (an unowned reference or an index into the server's links, cleared
on close as `detachSessions` does today) and batched pushes held per link
instead of in the turn's `held` list (a failed commit drops a link's
pending pushes instead), which would leave about one retain per push.

**Against the firehose** the client engine is measured alone (issue 17:
<= 1 us of CPU per event through 3 inline plugins, <= 0.1x the Python
peer). Done for this page, each step measured A/B with interleaved runs of
the two binaries (min of 3 to 9 runs; the spread is wide on the shared
cores): magix pushes are read straight from the received bytes
(`ServerPush.scanMagix`: op, room, seq, from, event, and the payload kept
as the received text when it is in the form our serializer writes;
anything else, or anything the full decoder would reject, goes through
`JSON.parse` + `ServerPush.decode` as before) and plugins get that text
(4.69 -> 3.16 us); plugin dispatch with no lock, set lookup or allocation
per event, one payload buffer per loop turn (3.28 -> 2.99 us); a lazily
parsed payload published through an atomic; plugin threads count a batch's
successful calls once at its end (2.82 -> 2.69 us); the WebSocket client
reads 64 KiB per service instead of lws's 4 KiB (kernel share of the loop
thread 8% -> 2.8%; 2.94 -> 2.48 us); the receive buffer reused when nothing
kept the message (2.49 -> 2.41 us); no clock reads per event when no
metrics backend is set up, and `@exclusivity(unchecked)` on loop-only state
(~6% of the samples were runtime exclusivity checks; 2.61 -> 2.30 us).
Overall ~4.7 -> ~2.3 us on the quieter runs. Where the rest goes (`perf
record -g` at 2.35 us per event, share of the client's samples):
libwebsockets' frame parsing 23.8% (~0.56 us: lws 4.1 copies a received
payload into its buffer one byte at a time), apply + emit 17.9% (seq and
cursor, the cache lock, the callback registries' locks, fan-out), plugin
dispatch on the loop 16.8% (writing the payload text is 7 points of it),
the plugin threads 13.3% (a clock read per call, the watchdog's lock,
wake-ups), `scanMagix` 12.6%, RoomKitLoop's receive path 8.2% (mostly the
slow retain/release of objects that have weak references: host,
connection, the plugin manager's observer), other 6%. What would close the
gap to 1 us: a WebSocket layer with a bulk payload path on the client side
(the lws share alone is half of the target; hand-written framing is not
allowed here), a lock-free watchdog (an atomic head and start time, one
clock read per call) or inline plugins on the loop thread (giving up their
isolation), loop-side snapshots of the callback registries instead of three
locks per event, no weak-referenced objects on the per-message path, and
sessions looked up by a room index instead of the room string. Together
that is an estimated 1.3-1.5 us; the 0.1x ratio to the Python peer (whose
own CPU per event is ~5 us) needs the same.

**The client's profile, issue 26 (<= 1 us of CPU per event).** `perf
record -g` of `roomkit-bench client` against the firehose (3 inline
plugins, 100 rooms, one connection, release build; 10,075 samples over 7
s, on a machine loaded by other builds, so shares, not times), share of
the client's samples: libwebsockets' own code 16.5%, the plugin threads
20.2%, the engine's `received` 45.4% (of it: `emit` 28.0%, which holds the
event's encoding, `EventEncoding.members` + `appendObject`, 10.4%, and
plugin dispatch on the loop 8.2%; `scanMagix` 8.8%), the kernel 5.6%; and,
spread over all of these, 10.0% in the Swift runtime's slow retain and
release, the path taken by objects that have a weak reference (their
counts live in a side table). **lws's copy.** lws 4.1.6 (Debian 12's, the
one we link) runs every received byte through its client parser
(`lws_ws_client_rx_sm_block` calls `lws_ws_client_rx_sm` once per byte,
which stores it in the wsi's receive buffer); its receive options do not
change that: the protocol's `rx_buffer_size` (ours 64 KiB) and the
per-thread service buffer (ours 64 KiB) only decide how much is read and
when the payload is handed over (once per message up to 64 KiB), and
permessage-deflate is off (no extensions are offered), which keeps the
payload out of a second pass. The bulk path lws 4.1 has for the server
role (`lws_ws_frame_rest_is_payload`) came to the client role in lws 4.5
("ws: client: pass blocks to user code"); building against lws >= 4.5 is
what removes this share, hand-written framing being ruled out. Copies of a
payload from the socket to an inline hook: 5 (docs/ARCHITECTURE.md, "One
path for a room event"). **Done for issue 26:** the slow retains and
releases of the lws context (borrowed for each lws callback instead of
retained: it outlives every callback of its context) and of the client
connection (its connect timer held it weakly, which gave it a side table;
the timer now holds it strongly until the connection opens or finishes),
and `EventBroadcaster.yield` reads a snapshot of its observers kept by the
yielding thread, refreshed only when an atomic version moves, instead of a
lock and two array copies per event. The slow retain/release share went
from 10.0% (9.0% in a second pair of runs) to 2.7% (3.3%); what is left of
it is the weak host of `HostConnectionDelegate` (loaded once per message)
and the objects freed per event (a release to zero takes the same runtime
path: the event's `EventEncoding` and its payload's `LazyJSONText`). CPU
per event in five interleaved A/B pairs of the two binaries on the loaded
machine (load average 9-12 on the 2 cores): 4.26/6.99/4.72/6.61/4.92 us
before, 4.19/6.59/5.86/6.45/4.39 us after, lower in four pairs of five;
with this much other load the figures move with the machine as much as
with the binaries. Tried and dropped: reusing the event's `EventEncoding`
and its bytes for the next event when no sink kept them (the allocator's
share did not move, the copies of the now optional event cost as much, and
CPU per event came out higher in both A/B pairs). Still open: lws >= 4.5
(16.5%), the plugin threads and dispatch (issue 26's hook-cost row), the
encoding's copy and allocation per event, and the host's weak reference
per message.

**Plugin dispatch under load (issue 17: <= 100 ns amortised per inline
hook call).** The firehose rows above include the same engine with no
plugin at all (events counted by an observer, which the 3-plugin run has
too): the difference divided by 3 is what one inline hook call costs under
load, everything included (the payload text, the batch per plugin per loop
turn, the hop to the plugin's thread, the watchdog, the counters and the
plugin's own no-op call). The watchdog is off the per-call path (one per
plugin, watching the head of its queue) and calls are batched per plugin
per turn; what is left is in the firehose profile above: the plugin
threads' 13% (wake-ups, the watchdog lock, a clock read per call) and the
7% of payload writing on the loop. Under 100 ns needs the lock-free
watchdog and one clock read per batch instead of per call, or, for plugins
that opt out of isolation, calls on the loop thread itself.

**p99 at half load (issue 17: <= 2 ms; missed).** This run adds the
same half load to RoomKit with no plugin and the latency stamped by an
observer on the loop thread as the engine raises the event: p50 1.3 ms,
p99 15.3 ms, p99.9 20.2 ms at the engine, against p99 21.7 ms through the
3 plugins. So about 70% of the tail is there before the plugin hop: in the
sender, roomd and the engine's read of the socket. The peers, which call
their handlers inline, have the same tail (22.5 and 23.1 ms). roomd holds
every push of a loop turn until that turn's transaction commits (group
commit, the durability rule of PROTOCOL.md), and roomd's loop thread, its
checkpoint thread and the sender share CPU 0 under the pinning: a turn
that meets a checkpoint's page copies or the sender's burst holds its
pushes for that long. The plugin hop adds the rest (the 3 plugin threads
and the loop take turns on CPU 1). What we would try: a commit deadline
(close the turn's transaction after at most ~1 ms of requests instead of
at the end of a turn that read 256 KiB per socket), the checkpointer off
roomd's core, and for the client the lock-free watchdog of the firehose
notes (fewer wake-ups per batch). On 2 shared cores the 2 ms p99 needs
roomd, the sender and the client each on a core of their own. Earlier
full runs (before pinning) saw the same p99 range from 14 to 228 ms
depending on what else ran on the machine.

**The NIO peer.** Where its CPU goes, from `perf record -g` against the
firehose (3 handlers, 100 rooms, one connection): ~80% of its samples are
under Foundation's `JSONDecoder` (`Incoming.init(from:)`: the
`decodeIfPresent` per optional key, the `JSONValue` payload with its
`try?` attempts, generic-metadata lookups and retain/release in
FoundationEssentials' unspecialised decoding); SwiftNIO's read path and
websocket-kit's frame handling (a `String` per text frame) are a few
percent. A `JSONValue` costs a thrown `DecodingError` per miss of its
type guess, which is why workload 5's decode + call is microseconds for a
75-byte message: decoding that message took ~7.9 us into `JSONValue`,
~3.3 us into typed `Codable` structs and ~2.1 us with `JSONSerialization`
on this machine (Swift 6.3.1's Foundation on Linux, release build), against
~1.3 us for Python's `json.loads`. The peer keeps the typed-envelope,
generic-payload shape a Swift user writes first. Decoding by `op`, so a magix push reads only its own five keys,
took it from ~8.5 to ~6.5 us per event on this machine; what would take it
further is what a user leaves Codable for: a streaming or lazy JSON reader
over the ByteBuffer. It is the peer that shows what the usual Swift server
stack costs, where the Python peer shows the usual scripting stack.

**Not compared.** The NIO peer does not take part in workloads 7 and 8
(RoomKit's plugin isolation and roombot: nothing to compare there).

**Where the client is measured on its own: CPU per operation.** The rows
"client CPU" divide the client process's CPU time (all threads) by the
logins or events it handled; that is what the client would need per
operation on a free core, whatever roomd does.

**Client memory per idle session (issue 17: <= 1 KiB).** Measured apart
from the table with a host in 20,000 rooms against a real roomd (debug
build, the same layouts): the heap in use per session (glibc
`malloc_info`) and RSS after `malloc_trim`. Before this page's run: 1,060
bytes in use and ~1,580 of RSS per session. Where it went, per session: the
`SessionRecord` (504 bytes, 192 of them an inline `SessionCursor?` that is
set only while a restored login is in flight), the `Room` (232 bytes plus
three `LockedValue` boxes, each a heap block and a separate pthread mutex:
six more blocks, ~300 bytes), the snapshot's scene array (a copy of the
initial `[init]` scene per room, ~100 bytes) and member array (~110), the
session ID string (30 characters, a 64-byte block), two dictionary entries
(~60), and the answered login's timeout entry in the deadline heap (32
bytes, kept for the whole 30 s login timeout). RSS above the heap in use
was fragmentation and arenas: each `Room` was made on whichever
cooperative-pool thread called `loginRoom`, in that thread's malloc arena.
Changed: inline `Synchronization.Mutex`es in `Room` (one block), the cursor
boxed, the initial scenes shared, cancelled deadlines compacted once they
are half the heap, and the `Room` made on the loop thread with the
session's other blocks. After: 786 bytes in use and ~960-1,050 of RSS per
session at 20,000; in this run's table, at 100,000, 1,279 bytes of RSS per
session (1,799 on the previous page) and 1,065 after `malloc_trim`: the
1 KiB target is missed by 25% (4% after a trim). What is left: the record (328: user,
token, resume and fleet fields; the login-only ones could move to a block
that exists only during a login, ~90 bytes), the room and its cache (~240),
the member array, the session ID, and the dictionaries.

**Fixed while benchmarking** (all tests pass; each a small change):

- roomd: `RoomServer.received` set `lastSeen` on every session of the
  connection for every message: O(sessions per connection) per request,
  12,500 writes per login at 100k sessions over 8 connections. It is only
  read for detached sessions and is copied from the link when it closes;
  the loop is gone. A/B with the same client, 100k sessions over 8
  connections: 4,887 -> 5,448 logins/s (+11%; the cost grows with the
  sessions per connection, and hits every later request too).
- RoomKitLoop: `WebSocketFrame(bytes:)` copied a generic collection byte by
  byte (unspecialised `initializeMemory(as:from:)`): 13% of the client's
  CPU per login; now one `memcpy` for contiguous bytes (every caller; roomd's
  frames too).
- RoomKit: `drive()` drew a jitter value from the system generator (a
  `getrandom` syscall) for every received message; ~5% of the engine's CPU
  under load. Only tick and close inputs (the ones that can back off) draw.
- Plugins: `PluginRuntime.post` armed a `DispatchQueue.global().asyncAfter`
  watchdog for every hook call, with its deadline counted from enqueue: a
  burst that queued more than `timeoutMs` of calls failed every call behind
  it and quarantined healthy no-op plugins (plugin-bench hung at 50,000
  events: all three were quarantined). Now one watchdog per plugin watches
  the call at the head of its queue, which gets its full `timeoutMs` from
  when it could start; a stuck call still fails the calls behind it one
  timeout apart, so a hanging plugin is still quarantined. Manager path:
  ~5.1 -> ~1.7 us of CPU per hook call.
- Plugins: `PluginManager` posted every room event to every plugin's queue
  separately, waking each plugin thread once per event (31% of the client's
  samples in `finish_task_switch`). Room events raised in one loop turn now
  go to each plugin as one batch (one queue hop per plugin per turn; each
  call still has its own watchdog and counters). Client CPU per event at
  saturation: ~15.5 -> ~8 us. `rooms: ["*"]` no longer calls `fnmatch`.

**What is left in the client, per login:** the async API's task and
continuation hops between the cooperative pool and the loop thread, and
decoding the snapshot. The Swift SDK trampoline decodes every payload into
`JSON` before calling `roomEvent` (~60 ns empty, ~1 us for a 75-byte
payload): a lazily decoded payload would make a no-op Swift hook as cheap
as a C one, but changes the SDK's public protocol. `PluginManager`'s
per-call path in workload 5 is measured through `dispatchPlayerEvent`,
which is not batched (player events are rare); room events are batched as
above, and the firehose rows give their cost under load.

**Bot restart: the client's pacing.** Without a service token roombot
paces its one connection at 190 requests/s under roomd's default
per-connection limit (200/s): 10,000 resumes took 53 s on the previous page
(52 s for the first logins), and a bot in more rooms than `190 x (heartbeat
timeout - restart time)` (about 17,000 at the defaults) would show its last
rooms leaving and coming back. With `serviceToken` in `bot.json` (or
`--service-token-file`), the connection gets roomd's service bucket and
the bot paces to what the hello reply advertises, which is how workload 8
runs now: the rows above show the resume time against a default roomd."""
