"""Runs the RoomKit benchmarks side by side with the peers and writes
docs/BENCHMARKS.md. Started by `make bench` (Benchmarks/run.sh) after the
release build; BENCH_QUICK=1 makes a smoke run of a few minutes.

Every workload runs once per side against the same release-built roomd,
started fresh for each: RoomKit (`roomkit-bench client`), the Python peer
(`peers/roomkit_peer.py client`) and the NIO peer (`peers/nio-peer`, when
built). All take the same options, read the same commands on stdin and
print the same JSON lines; the event source is the same `roomkit-bench
send` process for all. The whole set runs BENCH_RUNS times (default 3, one
in BENCH_QUICK); the report shows each figure's median and min-max.

With BENCH_PIN (default: on when `taskset` exists and there are 2 or more
CPUs) the client under test runs on CPU 1 and what it talks to (roomd, the
sender, the firehose, redis) on CPU 0, so every client engine gets one core
of its own whatever its thread count.
"""

import atexit
import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from report import render, figures
from roomd_workloads import roomd_alone, million_rooms
from firehose_workload import firehose
from redis_anchor import redis_fanout
from python_plugin_workload import python_plugin

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BIN = os.path.join(HERE, ".build", "release")
PLUGINS = os.path.join(HERE, ".build", "bench-plugins")
LOGS = os.path.join(HERE, ".build", "logs")
SECRET = "bench-secret"
QUICK = os.environ.get("BENCH_QUICK") == "1"
RUNS = int(os.environ.get("BENCH_RUNS", "1" if QUICK else "3"))
RATE = "1000000"
NIO_PEER = os.path.join(HERE, "peers", "nio-peer", ".build", "release", "NIOPeer")
PIN = os.environ.get("BENCH_PIN", "1" if shutil.which("taskset") and (os.cpu_count() or 1) >= 2 else "0") == "1"
SERVER_CPU, CLIENT_CPU = 0, 1


def pinned(command, cpu):
    """`command` under `taskset -c cpu` when pinning is on (cpu None: never)."""
    return ["taskset", "-c", str(cpu), *command] if PIN and cpu is not None else list(command)


def log(message):
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


RUNNING = []


@atexit.register
def stop_running():
    """A failed workload must not leave a roomd behind."""
    for roomd in list(RUNNING):
        roomd.stop()


class Roomd:
    """The release roomd as a child process, with raised per-connection limits
    (or, with `defaults`, exactly as shipped)."""

    def __init__(self, name, extra=(), defaults=False, pin=True):
        self.data = tempfile.mkdtemp(prefix=f"roomd-{name}-")
        self.name = name
        self.extra = list(extra)
        self.defaults = defaults
        self.pin = pin
        self.port = 0
        self.process = None
        RUNNING.append(self)
        self.start()

    def start(self):
        stderr = open(os.path.join(LOGS, f"roomd-{self.name}.log"), "a")
        limits = [] if self.defaults else [
            "--rate-limit", RATE, "--rate-limit-burst", RATE,
            "--max-outbound-bytes", str(1 << 30), "--max-connections-per-ip", "100000"]
        self.process = subprocess.Popen(pinned(
            [os.path.join(BIN, "roomd"), "serve", "--listen", f"127.0.0.1:{self.port}", "--secret", SECRET,
             "--data", self.data, *limits, "--log-level", "warning"] + self.extra, SERVER_CPU if self.pin else None),
            stdout=subprocess.PIPE, stderr=stderr, text=True)
        line = self.process.stdout.readline()
        if not line.startswith("listening on"):
            raise RuntimeError(f"roomd did not start: {line!r}")
        self.port = int(line.strip().rsplit(":", 1)[1])

    @property
    def url(self):
        return f"ws://127.0.0.1:{self.port}/v1/rooms"

    def rss(self):
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def cpu_seconds(self):
        """User + system CPU time of roomd so far (all its threads)."""
        with open(f"/proc/{self.process.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def kill9(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self):
        # The data is thrown away: no graceful stop (it would persist every
        # session first, seconds at 100k).
        if self.process.poll() is None:
            self.kill9()
        shutil.rmtree(self.data, ignore_errors=True)
        if self in RUNNING:
            RUNNING.remove(self)


class Client:
    """A bot process (RoomKit or the peer) driven through stdin/stdout."""

    def __init__(self, side, name, roomd, **options):
        options = {"url": roomd.url, "secret": SECRET, **options}
        if side in ("raw", "raw-batched"):
            command = [os.path.join(BIN, "roomkit-bench"), "sink"]
            options = {k: v for k, v in options.items() if k in ("url", "secret", "connections", "rooms")}
            # "raw-batched": the sinks' hello asks for batched messages
            # (docs/PROTOCOL.md "Batched messages"); "raw" does not.
            options["batch"] = 1 if side == "raw-batched" else 0
        elif side == "roomkit":
            command = [os.path.join(BIN, "roomkit-bench"), "client"]
            plugins = options.pop("plugins", 0)
            if plugins:
                options["manifest"] = manifest(plugins)
                options["probe"] = os.path.join(PLUGINS, "libbench-probe-c.so")
        elif side == "nio":
            command = [NIO_PEER, "client"]
            options["tokens-file"] = tokens_file(options.pop("secret"), int(options.get("connections", 1)),
                                                 options.get("shared") == 1, options.get("service") == 1)
        else:
            command = [sys.executable, os.path.join(HERE, "peers", "roomkit_peer.py"), "client"]
        for key, value in options.items():
            command += [f"--{key}", str(value)]
        self.stderr = open(os.path.join(LOGS, f"{name}-{side}.log"), "a")
        self.process = subprocess.Popen(pinned(command, CLIENT_CPU), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.stderr, text=True)

    def read(self):
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"client exited ({self.process.wait()})")
        return json.loads(line)

    def ask(self, command):
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.read()

    def quit(self):
        try:
            self.process.stdin.write("quit\n")
            self.process.stdin.flush()
            self.process.wait(timeout=30)
        except (BrokenPipeError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()


def tokens_file(secret, connections, shared, service):
    """The NIO peer's tokens, one line per connection (user bot-<index> when
    the rooms are shared, else one for user bot): the harness signs them, as
    signing is in no figure (the Python peer signs its own before it starts
    timing)."""
    role = "service" if service else "writer"
    users = [f"bot-{index}" for index in range(connections)] if shared else ["bot"]
    path = os.path.join(HERE, ".build", f"tokens-{connections}-{int(shared)}-{role}.txt")
    with open(path, "w") as file:
        file.write("\n".join(jwt(secret, user, role) for user in users) + "\n")
    return path


def manifest(count):
    """`count` C plugins on the room hook: no-ops, the last one the probe."""
    entries = []
    for index in range(count):
        library = "libbench-probe-c.so" if index == count - 1 else "libbench-noop-c.so"
        entries.append({"name": f"plugin-{index}", "library": os.path.join(PLUGINS, library), "abi": 1,
                        "hooks": ["room"], "rooms": ["*"], "order": index,
                        "isolation": "inline"})
    path = os.path.join(HERE, ".build", f"plugins-{count}.json")
    with open(path, "w") as file:
        json.dump({"manifestVersion": 1, "plugins": entries}, file)
    return path


def send(roomd, rooms, duration, rate=None, window=1000, prefix="room", cpu=SERVER_CPU):
    command = [os.path.join(BIN, "roomkit-bench"), "send", "--url", roomd.url, "--secret", SECRET,
               "--rooms", str(rooms), "--duration", str(duration), "--window", str(window), "--prefix", prefix]
    if rate:
        command += ["--rate", str(int(rate))]
    output = subprocess.run(pinned(command, cpu), capture_output=True, text=True, timeout=duration + 120)
    return json.loads(output.stdout.strip().splitlines()[-1])


SIDES = ("roomkit", "peer", "nio") if os.access(NIO_PEER, os.X_OK) else ("roomkit", "peer")


def idle_sessions(results):
    sizes = [2_000, 10_000] if QUICK else [10_000, 50_000, 100_000]
    connections = 8
    for size in sizes:
        for side in SIDES:
            roomd = Roomd(f"sessions-{size}")
            roomd_before = roomd.rss()
            client = Client(side, f"sessions-{size}", roomd, connections=connections, rooms=size // connections)
            ready = client.read()
            ready["roomd_rss"] = roomd.rss()
            ready["roomd_rss_before"] = roomd_before
            client.quit()
            # After quit the sessions are detached and retained (PROTOCOL.md §4.5).
            time.sleep(1)
            ready["roomd_rss_retained"] = roomd.rss()
            roomd.stop()
            ready["bytes_per_session"] = (ready["rss_after"] - ready["rss_before"]) / max(1, ready["sessions"])
            ready["bytes_per_session_trimmed"] = (ready["rss_trimmed"] - ready["rss_before"]) / max(1, ready["sessions"])
            results["sessions"].setdefault(str(size), {})[side] = ready
            log(f"sessions {size} {side}: {ready['logins_per_s']:.0f} logins/s, "
                f"{ready['bytes_per_session']:.0f} B/session ({ready['failed']} failed)")


def throughput(results):
    connections, rooms, duration = 4, 100, (3 if QUICK else 6)
    for side in SIDES:
        roomd = Roomd("throughput")
        client = Client(side, "throughput", roomd, connections=connections, rooms=rooms, shared=1, plugins=3,
                        latency=1)
        ready = client.read()
        client.ask("mark")
        sender = send(roomd, rooms, duration)
        saturated = client.ask("report")
        half = saturated["events_per_s"] / 2
        client.ask("mark")
        paced = send(roomd, rooms, duration, rate=half / connections)
        latency = client.ask("report")
        client.quit()
        roomd.stop()
        results["throughput"][side] = {"ready": ready, "sender": sender, "saturated": saturated,
                                       "half_load": half, "paced_sender": paced, "latency": latency}
        log(f"throughput {side}: {saturated['events_per_s']:.0f} events/s (roomd {sender['events_per_s']:.0f} "
            f"appends/s x {connections}); p99 at half load {latency['latency']['p99_us']:.0f} us")
        if side == "roomkit":
            # Where the tail comes from: the same half load with no plugin,
            # the latency stamped by an observer on the loop thread when the
            # engine raises the event (sender -> roomd -> the engine's fan-out).
            roomd = Roomd("throughput-bare")
            client = Client(side, "throughput", roomd, connections=connections, rooms=rooms, shared=1, plugins=0,
                            latency=1)
            client.read()
            client.ask("mark")
            send(roomd, rooms, duration, rate=half / connections)
            bare = client.ask("report")
            client.quit()
            roomd.stop()
            results["throughput"][side]["latency_bare"] = bare
            log(f"throughput {side}, no plugins: p99 at half load {bare['latency']['p99_us']:.0f} us at the engine")


def recovery(results):
    sessions, connections = (2_000 if QUICK else 10_000), 8
    for side in SIDES:
        roomd = Roomd("recovery")
        client = Client(side, "recovery", roomd, connections=connections, rooms=sessions // connections)
        ready = client.read()
        time.sleep(1)
        killed = time.monotonic_ns()
        roomd.kill9()
        roomd.start()
        listening = time.monotonic_ns()
        recovered = client.ask("await-reconnect")
        client.quit()
        roomd.stop()
        # The connections come back at jittered times (full-jitter backoff), so
        # the span from first to last RECONNECTED holds idle gaps: the resume
        # rate counts only the 10 ms slices in which resumes completed.
        times = recovered.pop("times")
        active = max(1, len({t // 10_000_000 for t in times})) * 0.010
        entry = {"ready": ready, "recovered": recovered, "restart_s": (listening - killed) / 1e9,
                 "all_reconnected_s": (recovered["last_ns"] - killed) / 1e9,
                 "after_listening_s": (recovered["last_ns"] - listening) / 1e9,
                 "resume_span_s": (recovered["last_ns"] - recovered["first_ns"]) / 1e9,
                 "resume_active_s": active, "resume_per_s": recovered["reconnected"] / active}
        entry["resume_vs_login"] = entry["resume_per_s"] / ready["logins_per_s"]
        results["recovery"][side] = entry
        log(f"recovery {side}: {recovered['reconnected']}/{ready['sessions']} reconnected "
            f"{entry['all_reconnected_s']:.2f} s after kill -9; resume {entry['resume_per_s']:.0f}/s "
            f"vs login {ready['logins_per_s']:.0f}/s")


def fanout(results):
    sizes = [10, 100] if QUICK else [10, 100, 1000]
    duration = 3 if QUICK else 5
    for members in sizes:
        rooms = max(2, 200 // members)
        # "raw": connections that count frames without parsing them, to show
        # roomd's own fan-out rather than what a client engine digests;
        # "raw-batched": the same sinks asking for batched messages (a batch
        # counts as the pushes it holds). The RoomKit side asks too: it is
        # the engine's default (RoomHostConfiguration.batchesMessages); the
        # peers do not know the extension.
        for side in SIDES + ("raw", "raw-batched"):
            roomd = Roomd(f"fanout-{members}")
            client = Client(side, f"fanout-{members}", roomd, connections=members, rooms=rooms, shared=1, plugins=0,
                            window=200)
            ready = client.read()
            client.ask("mark")
            cpu_before = roomd.cpu_seconds()
            sender = send(roomd, rooms, duration)
            delivered = client.ask("report")
            roomd_cpu = roomd.cpu_seconds() - cpu_before
            roomd_rss = roomd.rss()
            client.quit()
            roomd.stop()
            results["fanout"].setdefault(str(members), {})[side] = {
                "ready": ready, "sender": sender, "delivered": delivered, "connections_held": members + 1,
                "roomd_rss": roomd_rss, "roomd_cpu_s": roomd_cpu}
            log(f"fan-out {members} {side}: {delivered['events_per_s']:.0f} deliveries/s, "
                f"roomd {sender['events_per_s']:.0f} events/s")
        if members == 100:
            anchor = redis_fanout(sys.modules[__name__], members, 50_000 if QUICK else 200_000)
            if anchor:
                results["fanout"][str(members)]["redis"] = anchor
                log(f"redis anchor {members}: {anchor['deliveries_per_s']:.0f} deliveries/s, "
                    f"{anchor['cpu_us_per_delivery']:.2f} us CPU per delivery")


def plugin_overhead(results):
    iterations = 2_000_000 if QUICK else 20_000_000
    swift = subprocess.run([os.path.join(BIN, "plugin-bench"), "--c", os.path.join(PLUGINS, "libbench-noop-c.so"),
                            "--swift", os.path.join(BIN, "libbench-noop-swift.so"), "--iterations", str(iterations),
                            "--manager-iterations", str(50_000)],
                           capture_output=True, text=True, timeout=600)
    peer = subprocess.run([sys.executable, os.path.join(HERE, "peers", "peer_plugins.py"),
                           "--iterations", str(iterations // 10)], capture_output=True, text=True, timeout=600)
    lines = swift.stdout.strip().splitlines()
    if not lines:
        log(f"plugin-bench failed ({swift.returncode}): {swift.stderr.strip()[-500:]}")
        return
    results["plugins"] = {"roomkit": json.loads(lines[-1]),
                          "peer": json.loads(peer.stdout.strip().splitlines()[-1])}
    if "nio" in SIDES:
        nio = subprocess.run([NIO_PEER, "plugins", "--iterations", str(iterations // 10)], capture_output=True,
                             text=True, timeout=600)
        if nio.stdout.strip():
            results["plugins"]["nio"] = json.loads(nio.stdout.strip().splitlines()[-1])
    log(f"plugins: {results['plugins']}")


def bot_restart(results):
    """roombot in N rooms, kill -9, started again: how long until every room
    is back, and how many of the resumes the other members never saw; at
    roomd's default heartbeat timeout, and at one shorter than the resume."""
    rooms = 2_000 if QUICK else 10_000
    results["botrestart"] = {"roomkit": bot_restart_run(rooms, 90)}
    results["botrestart"]["roomkit_short"] = bot_restart_run(rooms, 5 if QUICK else 30)


def bot_restart_run(rooms, heartbeat):
    # roomd exactly as shipped but for the heartbeat timeout; the bot on one
    # service connection (bot.json's serviceToken), as a bot in many rooms runs.
    roomd = Roomd(f"bot-restart-{heartbeat}", ["--heartbeat-timeout", str(heartbeat)], defaults=True,
                  pin=False)
    work = tempfile.mkdtemp(prefix="bot-restart-")
    events = os.path.join(work, "events.ndjson")
    config = os.path.join(work, "bot.json")
    with open(config, "w") as file:
        json.dump({"server": roomd.url, "user": {"id": "bot"}, "auth": {"secret": SECRET},
                   "serviceToken": jwt(SECRET, "bot", "service"),
                   "rooms": [f"r{index}" for index in range(rooms)], "events": events,
                   "loginTimeout": 300, "reconnectWindow": 600}, file)
    stderr = open(os.path.join(LOGS, "bot-restart-roombot.log"), "a")

    def start():
        return subprocess.Popen([os.path.join(BIN, "roombot"), "run", "--config", config, "--log-level", "warning"],
                                stdout=subprocess.DEVNULL, stderr=stderr)

    def lines(offset):
        """LOGINED and resync lines after byte `offset` of the event log."""
        with open(events, "rb") as file:
            file.seek(offset)
            data = file.read()
        logined, resync = [], 0
        for raw in data.splitlines():
            if b'"LOGINED"' in raw:
                logined.append(json.loads(raw))
            elif b'"resync"' in raw:
                resync += 1
        return logined, resync

    def wait_logined(offset, started, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            logined, resync = lines(offset) if os.path.exists(events) else ([], 0)
            if len(logined) >= rooms:
                return logined, resync
            time.sleep(0.2)
        raise RuntimeError(f"only {len(logined)} of {rooms} rooms LOGINED within {timeout} s")

    first = start()
    started = time.time()
    logined, _ = wait_logined(0, started, 600)
    first_s = max(line["ts"] for line in logined) / 1000 - started
    time.sleep(1)  # idle: every cursor committed
    offset = os.path.getsize(events)
    first.send_signal(signal.SIGKILL)
    first.wait()
    killed_ms = int(time.time() * 1000)
    second = start()
    restarted = time.time()
    logined, resync = wait_logined(offset, restarted, 600)
    last = max(line["ts"] for line in logined)
    # `recovered` is a field of the line (docs/CLI.md "Event log"); older logs had it in extendedData.
    recovered = sum(1 for line in logined
                    if line.get("recovered", line.get("extendedData", {}).get("recovered")) is True)
    second.send_signal(signal.SIGKILL)
    second.wait()
    # What the other members saw: the room's own log (every member sees the
    # same seq'd events), from the kill on. A visible resume left a userUpdate.
    visible = 0
    import urllib.request
    token = jwt(SECRET, "observer")
    for index in range(rooms):
        request = urllib.request.Request(
            f"http://127.0.0.1:{roomd.port}/v1/rooms/r{index}/recording?from={killed_ms}",
            headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            body = answer.read().decode().splitlines()[1:]
        if any('"userUpdate"' in line for line in body):
            visible += 1
    roomd.stop()
    shutil.rmtree(work, ignore_errors=True)
    entry = {"rooms": rooms, "first_start_s": first_s, "all_resumed_s": last / 1000 - restarted,
             "recovered": recovered, "resync": resync, "visible": visible,
             "invisible_fraction": (rooms - visible) / rooms, "heartbeat_timeout_s": heartbeat,
             "down_s": (restarted * 1000 - killed_ms) / 1000}
    log(f"bot restart (heartbeat timeout {heartbeat} s): {rooms} rooms back {entry['all_resumed_s']:.1f} s after start "
        f"(first start {first_s:.1f} s); {recovered} recovered; {visible} visible; {resync} resync")
    return entry


MILLION_RUNS = int(os.environ.get("BENCH_MILLION_RUNS", "1"))
million_done = 0


def million_rooms_full(results):
    """Workload 9, one million rooms: the full run only (BENCH_QUICK skips
    it), and only in the first BENCH_MILLION_RUNS runs (default 1): one run
    of it takes up to 15 minutes (three phases with a 300 s bound each), so
    its figures are that run's, as the page says."""
    global million_done
    if not QUICK and million_done < MILLION_RUNS:
        million_done += 1
        million_rooms(results, sys.modules[__name__])


def jwt(secret, user, role="reader"):
    """An HS256 token for any room (the recording API, the NIO peer)."""
    import base64
    import hashlib
    import hmac

    def encode(data):
        return base64.urlsafe_b64encode(data).rstrip(b"=")
    now = int(time.time())
    header = encode(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = encode(json.dumps({"sub": user, "room": "*", "role": role, "exp": now + 3600, "iat": now}).encode())
    signature = encode(hmac.new(secret.encode(), header + b"." + claims, hashlib.sha256).digest())
    return (header + b"." + claims + b"." + signature).decode()
def plugin_isolation(results):
    """Workload 6: "isolation": "process" next to "inline" (isolation-bench)."""
    events = 200_000 if QUICK else 1_000_000
    run = subprocess.run([os.path.join(BIN, "isolation-bench"), "--c", os.path.join(PLUGINS, "libbench-noop-c.so"),
                          "--events", str(events), "--urls", str(5_000 if QUICK else 20_000)],
                         capture_output=True, text=True, timeout=900)
    results["isolation"] = json.loads(run.stdout.strip().splitlines()[-1])
    log(f"isolation: {results['isolation']}")


def machine():
    model = "unknown"
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as meminfo:
        total = int(meminfo.readline().split()[1]) * 1024
    import websockets
    revision = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
    swift = subprocess.run(["swift", "--version"], capture_output=True, text=True).stdout.splitlines()
    return {"nproc": os.cpu_count(), "cpu": model, "nio": nio_peer_versions(), "ram_gib": total / (1 << 30), "kernel": platform.release(),
            "python": platform.python_version(), "websockets": websockets.__version__,
            "swift": swift[0] if swift else "?", "revision": revision,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def nio_peer_versions():
    """What the NIO peer was built with, from its Package.resolved."""
    if not os.access(NIO_PEER, os.X_OK):
        return None
    try:
        with open(os.path.join(HERE, "peers", "nio-peer", "Package.resolved")) as file:
            pins = {pin["identity"]: pin["state"].get("version") for pin in json.load(file)["pins"]}
    except (OSError, ValueError, KeyError):
        pins = {}
    return (f"SwiftNIO {pins.get('swift-nio', '?')}, websocket-kit {pins.get('websocket-kit', '?')}, one "
            "single-threaded EventLoopGroup for every connection, Foundation JSONDecoder/JSONEncoder (Codable), "
            "handlers called inline; release build")


def main():
    os.makedirs(LOGS, exist_ok=True)
    if sys.argv[1:] == ["--render"]:  # rewrite docs/BENCHMARKS.md from the last full (or quick) run
        with open(os.path.join(HERE, ".build", "results.json")) as file:
            results = json.load(file)
        results["figures"] = figures(results)
        with open(os.path.join(HERE, ".build", "results.json"), "w") as file:
            json.dump(results, file, indent=1)
        with open(os.path.join(ROOT, "docs", "BENCHMARKS.md"), "w") as file:
            file.write(render(results, "BENCH_QUICK=1 make bench" if results["quick"] else "make bench"))
        return
    started = time.monotonic()
    results = {"quick": QUICK, "machine": machine(), "runs": [], "sides": list(SIDES),
               "pinning": (f"client under test on CPU {CLIENT_CPU}; roomd, sender, firehose and redis on CPU "
                           f"{SERVER_CPU} (`taskset -c`)") if PIN else "none"}
    only = set(sys.argv[1:])
    this = sys.modules[__name__]
    for run in range(RUNS):
        current = {"roomd": {}, "firehose": {}, "sessions": {}, "throughput": {}, "recovery": {}, "fanout": {},
                   "plugins": {}, "isolation": {}, "botrestart": {}, "million": {}, "pythonplugin": {}}
        results["runs"].append(current)
        for name, workload in (("roomd", lambda results: roomd_alone(results, this)),
                               ("firehose", lambda results: firehose(results, this)),
                               ("sessions", idle_sessions), ("throughput", throughput), ("recovery", recovery),
                               ("fanout", fanout), ("plugins", plugin_overhead), ("isolation", plugin_isolation),
                               ("botrestart", bot_restart), ("million", million_rooms_full),
                               ("pythonplugin", lambda results: python_plugin(results, this))):
            if only and name not in only:
                continue
            log(f"run {run + 1} of {RUNS}, workload: {name}")
            workload(current)
    results["elapsed_s"] = time.monotonic() - started
    results["figures"] = figures(results)
    name = "results-partial.json" if only else "results.json"
    with open(os.path.join(HERE, ".build", name), "w") as file:
        json.dump(results, file, indent=1)
    if only:
        log(f"partial run: docs/BENCHMARKS.md left alone (results in Benchmarks/.build/{name})")
        return
    command = "BENCH_QUICK=1 make bench" if QUICK else "make bench"
    with open(os.path.join(ROOT, "docs", "BENCHMARKS.md"), "w") as file:
        file.write(render(results, command))
    log(f"done in {results['elapsed_s']:.0f} s; wrote docs/BENCHMARKS.md")


if __name__ == "__main__":
    main()
