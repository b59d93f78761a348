"""The Python peer of the RoomKit benchmarks: what a user would pick instead.

An asyncio bot on the `websockets` library that speaks room.v1 (the shared
spec's PROTOCOL.md) the way a competent Python engineer would write it: one
connection multiplexes many room sessions, requests are pipelined with a
bounded window of replies outstanding, pushes are applied by seq and fanned
out to in-process handler "plugins", and a lost connection is re-established
with full-jitter backoff and every session resumed.

It mirrors `roomkit-bench client` exactly: same options, the same stdin
commands (mark, report, await-reconnect, quit) and the same JSON lines on
stdout, so Benchmarks/bench.py drives both the same way.

    python roomkit_peer.py client --url ws://127.0.0.1:PORT/v1/rooms --secret S
        --connections 8 --rooms 1000 [--shared 1] [--plugins 3] [--latency 1]

Workload 5 (the cost of a handler call) is peer_plugins.py.
"""

import asyncio
import base64
import ctypes
import gc
import hashlib
import hmac
import json
import random
import sys
import time

import websockets
from websockets.exceptions import ConnectionClosed

dumps = json.JSONEncoder(separators=(",", ":")).encode
loads = json.loads
MAGIX = 8


def emit(fields):
    sys.stdout.write(dumps(fields) + "\n")
    sys.stdout.flush()


def note(message):
    sys.stderr.write(f"[peer] {message}\n")


def rss_bytes():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def token(secret, user, role="writer"):
    def b64(data):
        return base64.urlsafe_b64encode(data).rstrip(b"=")

    now = int(time.time())
    header = b64(dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = b64(dumps({"sub": user, "room": "*", "role": role, "exp": now + 3600, "iat": now}).encode())
    signing_input = header + b"." + claims
    signature = b64(hmac.new(secret.encode(), signing_input, hashlib.sha256).digest())
    return (signing_input + b"." + signature).decode()


class Session:
    """One room session: the server's handle on it and the room it caches."""

    __slots__ = ("room", "session", "member_id", "seq", "state", "members", "streams", "extra_info", "phase")

    def __init__(self, room):
        self.room = room
        self.session = None
        self.member_id = None
        self.seq = 0
        self.state = None
        self.members = None
        self.streams = None
        self.extra_info = None
        self.phase = "LOGOUT"


class Stats:
    """What the benchmark counts, across every connection."""

    def __init__(self, record_latency):
        self.record_latency = record_latency
        self.reset()
        self.reconnected = 0
        self.first_reconnected = 0
        self.last_reconnected = 0
        self.first_lost = 0
        self.reconnect_times = []

    def reset(self):
        self.events = 0
        self.first = 0
        self.last = 0
        self.latencies = []


def make_plugins(count, stats):
    """`count` no-op handlers; the last one also counts magix and their latency
    (the same probe as the C plugin on the RoomKit side)."""

    def noop(kind, room, message):
        pass

    def probe(kind, room, message):
        if kind != MAGIX:
            return
        now = time.monotonic_ns()
        if stats.events == 0:
            stats.first = now
        stats.last = now
        stats.events += 1
        if stats.record_latency:
            sent = message["payload"].get("t")
            if sent:
                stats.latencies.append(now - sent)

    return [noop] * (count - 1) + [probe] if count else [probe]


class Connection:
    """One WebSocket connection carrying many room sessions."""

    KINDS = {"state": 3, "memberState": 3, "userUpdate": 9, "streamUpdate": 10, "extraInfo": 11, "magix": MAGIX}

    def __init__(self, url, user, token, rooms, plugins, stats, window, service=False):
        self.service = service
        self.url = url
        self.user = {"id": user}
        self.token = token
        self.sessions = {room: Session(room) for room in rooms}
        self.plugins = plugins
        self.stats = stats
        self.window = window
        self.ws = None
        self.pending = {}
        self.next_id = 1
        self.heartbeat = 10.0
        self.logged_in = asyncio.Event()
        self.login_failures = 0

    async def request(self, message, on_reply=None):
        """Sends a request and waits for its reply. `on_reply` runs in the
        reader as the reply arrives, before any later push is applied."""
        request_id = self.next_id
        self.next_id += 1
        message["id"] = request_id
        future = asyncio.get_running_loop().create_future()
        self.pending[request_id] = (future, on_reply)
        await self.ws.send(dumps(message))
        return await future

    async def run(self):
        """Connects, logs in (or resumes) every session, reads until the
        connection drops, and reconnects with full-jitter backoff."""
        attempt = 0
        while True:
            try:
                async with websockets.connect(self.url, subprotocols=["room.v1"], compression=None,
                                              ping_interval=None, max_size=16 << 20, open_timeout=10) as ws:
                    self.ws = ws
                    attempt = 0
                    reader = asyncio.create_task(self.read(ws))
                    greeting = {"op": "hello", "client": "roomkit-python-peer/0.1"}
                    if self.service:
                        # A service connection (docs/PROTOCOL.md): the hello reply advertises
                        # its larger bucket; the window of requests in flight stays under it.
                        greeting["token"] = self.token
                    hello = await self.request(greeting)
                    self.heartbeat = hello.get("heartbeatInterval", 10000) / 1000
                    pinger = asyncio.create_task(self.ping(ws))
                    await self.login_all()
                    self.logged_in.set()
                    await reader
                    pinger.cancel()
            except (OSError, ConnectionClosed, asyncio.TimeoutError, websockets.InvalidHandshake):
                pass
            self.connection_lost()
            delay = random.uniform(0, min(30.0, 1.0 * 2 ** attempt))
            attempt += 1
            await asyncio.sleep(delay)

    def connection_lost(self):
        for future, _ in self.pending.values():
            if not future.done():
                future.set_exception(ConnectionError("connection lost"))
        self.pending.clear()
        lost = False
        for session in self.sessions.values():
            if session.phase in ("LOGINED", "RECONNECTED"):
                session.phase = "RECONNECTING"
                lost = True
        if lost and self.stats.first_lost == 0:
            self.stats.first_lost = time.monotonic_ns()

    async def ping(self, ws):
        while True:
            await asyncio.sleep(self.heartbeat)
            await ws.send(dumps({"op": "ping", "t": int(time.time() * 1000)}))

    async def login_all(self):
        todo = iter([s for s in self.sessions.values() if s.phase != "LOGINED" and s.phase != "RECONNECTED"])

        async def worker():
            for session in todo:
                await self.login(session)

        await asyncio.gather(*(worker() for _ in range(self.window)))

    async def login(self, session):
        message = {"op": "login", "room": session.room, "token": self.token, "user": self.user, "writable": True}
        resuming = session.session is not None
        if resuming:
            message["resume"] = {"session": session.session, "seq": session.seq}
        await self.request(message, lambda reply: self.logged(session, resuming, reply))

    def logged(self, session, resuming, reply):
        if not reply.get("ok"):
            self.login_failures += 1
            session.phase = "LOGIN_FAILED"
            return
        session.session = reply["session"]
        session.member_id = reply["memberId"]
        if "state" in reply:
            session.seq = reply["seq"]
            session.state = reply["state"]
            session.members = {m["memberId"]: m for m in reply["members"]}
            session.streams = reply["streams"]
            session.extra_info = reply["extraInfo"]
        if resuming:
            session.phase = "RECONNECTED"
            now = time.monotonic_ns()
            stats = self.stats
            if stats.reconnected == 0:
                stats.first_reconnected = now
            stats.last_reconnected = now
            stats.reconnected += 1
            stats.reconnect_times.append(now)
        else:
            session.phase = "LOGINED"

    async def read(self, ws):
        try:
            async for raw in ws:
                message = loads(raw)
                op = message["op"]
                if op == "reply":
                    future, on_reply = self.pending.pop(message["id"], (None, None))
                    if on_reply is not None:
                        on_reply(message)
                    if future is not None and not future.done():
                        future.set_result(message)
                elif op == "pong":
                    continue
                else:
                    session = self.sessions.get(message.get("room"))
                    if session is not None:
                        self.apply(session, op, message)
        except ConnectionClosed:
            pass

    def apply(self, session, op, message):
        """Applies a push once (by seq) to the cached room, then calls the plugins."""
        seq = message.get("seq")
        if seq is not None:
            if seq <= session.seq:
                return
            session.seq = seq
        if op == "magix":
            if message["from"] == session.member_id:
                return
        elif op == "state":
            patch = message["patch"]
            state = session.state
            for key, value in patch.items():
                if key == "globalState":
                    merged = state["globalState"]
                    for k, v in value.items():
                        if v is None:
                            merged.pop(k, None)
                        else:
                            merged[k] = v
                else:
                    state[key] = value
        elif op == "userUpdate":
            if message["type"] == "add":
                for member in message["users"]:
                    session.members[member["memberId"]] = member
            else:
                for member in message["users"]:
                    session.members.pop(member["memberId"], None)
        elif op == "memberState":
            member = session.members.get(message["memberId"])
            if member is not None:
                member["memberState"] = message["memberState"]
        elif op == "kicked":
            session.phase = "KICK_OUT"
        kind = self.KINDS.get(op)
        if kind is not None:
            room = session.room
            for plugin in self.plugins:
                try:
                    plugin(kind, room, message)
                except Exception as error:  # a failing plugin must not stop the connection
                    note(f"plugin failed: {error!r}")


def latency_summary(latencies):
    """p50/p99/p99.9/max in microseconds (exact ranks of the sorted samples;
    the RoomKit side uses an HdrHistogram with 3 significant digits)."""
    if not latencies:
        return {"count": 0, "p50_us": 0, "p99_us": 0, "p999_us": 0, "max_us": 0}
    ordered = sorted(latencies)

    def at(percentile):
        return ordered[min(len(ordered) - 1, max(0, int(len(ordered) * percentile / 100 + 0.5) - 1))] / 1000

    return {"count": len(ordered), "p50_us": at(50), "p99_us": at(99), "p999_us": at(99.9), "max_us": ordered[-1] / 1000}


async def read_commands():
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return
        yield line.strip()


async def client(options):
    url = options.get("url", "ws://127.0.0.1:7700/v1/rooms")
    secret = options.get("secret", "bench-secret")
    count = int(options.get("connections", 8))
    rooms_per_connection = int(options.get("rooms", 1000))
    shared = options.get("shared", "0") == "1"
    window = int(options.get("window", 1000))
    service = options.get("service", "0") == "1"
    stats = Stats(options.get("latency", "0") == "1")
    plugins = make_plugins(int(options.get("plugins", 3)), stats)
    connections = []
    for index in range(count):
        user = f"bot-{index}" if shared else "bot"
        rooms = [f"room-{i}" if shared else f"s{index}-{i}" for i in range(rooms_per_connection)]
        connections.append(Connection(url, user, token(secret, user, "service" if service else "writer"), rooms,
                                      plugins, stats, window, service))
    before = rss_bytes()
    started = time.monotonic_ns()
    cpu_before = time.process_time_ns()
    runners = [asyncio.create_task(c.run()) for c in connections]
    await asyncio.gather(*(c.logged_in.wait() for c in connections))
    elapsed = (time.monotonic_ns() - started) / 1e9
    login_cpu = time.process_time_ns() - cpu_before
    failures = sum(c.login_failures for c in connections)
    sessions = count * rooms_per_connection - failures
    await asyncio.sleep(1)
    after = rss_bytes()
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass
    trimmed = rss_bytes()
    emit({"phase": "ready", "sessions": sessions, "failed": failures, "connections": count, "login_s": elapsed,
          "logins_per_s": sessions / elapsed, "rss_before": before, "rss_after": after, "rss_trimmed": trimmed, "cpu_ns": login_cpu})
    marked_cpu = time.process_time_ns()
    async for command in read_commands():
        if command == "mark":
            stats.reset()
            marked_cpu = time.process_time_ns()
            emit({"phase": "marked"})
        elif command == "report":
            previous, quiet_since = -1, time.monotonic()
            while True:
                if stats.events != previous:
                    previous, quiet_since = stats.events, time.monotonic()
                elif time.monotonic() - quiet_since > 0.5:
                    break
                await asyncio.sleep(0.02)
            span = (stats.last - stats.first) / 1e9
            emit({"phase": "report", "events": stats.events, "first_ns": stats.first, "last_ns": stats.last,
                  "events_per_s": stats.events / span if span > 0 else 0, "latency": latency_summary(stats.latencies),
                  "cpu_ns": time.process_time_ns() - marked_cpu})
        elif command == "await-reconnect":
            deadline = time.monotonic() + 180
            while stats.reconnected < sessions and time.monotonic() < deadline:
                await asyncio.sleep(0.005)
            emit({"phase": "recovered", "reconnected": stats.reconnected, "first_ns": stats.first_reconnected,
                  "last_ns": stats.last_reconnected, "lost_ns": stats.first_lost,
                  "times": stats.reconnect_times})
        elif command == "quit":
            break
    for runner in runners:
        runner.cancel()


def main():
    if len(sys.argv) < 2:
        note("usage: roomkit_peer.py client [--option value ...]")
        sys.exit(2)
    args = sys.argv[2:]
    options = {args[i][2:]: args[i + 1] for i in range(0, len(args) - 1, 2) if args[i].startswith("--")}
    if sys.argv[1] == "client":
        asyncio.run(client(options))
    else:
        note(f"unknown command {sys.argv[1]}")
        sys.exit(2)


if __name__ == "__main__":
    main()
