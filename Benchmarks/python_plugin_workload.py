"""Workload "python plugin" (Benchmarks/bench.py): the no-op Python plugin
over the wire, events/s (target >= 100,000; issue #25).

The bot's side of the wire is played by this script: it spawns
`Benchmarks/plugins/noop_plugin.py` (the SDK's `roomkit_plugin`, a magix
handler that does nothing) exactly as roombot does (the socketpair on fd 3,
docs/PLUGIN-WIRE.md §1), does the handshake, then sends EVENTS frames of
BATCH magix records each, built before the clock starts, keeping at most
WINDOW frames unfinished, and stops the clock at the DONE of the last
record. Every record is parsed, decoded (`json.loads`) and handed to the
handler as the event-log dict, as in a real bot. Then the same with one
record per frame (256 frames in flight). Also measured: the URL round trip
to an idle Python plugin (p50/p99, µs).

Standalone: `python3 Benchmarks/python_plugin_workload.py [--events N]`
prints one JSON line.
"""

import argparse
import json
import os
import select
import socket
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PLUGIN = os.path.join(HERE, "plugins", "noop_plugin.py")
SDK = os.path.join(ROOT, "sdk", "python")

NULL = 0xFFFFFFFF
LOAD, EVENTS, URL, UNLOAD = 1, 2, 5, 7
HELLO, LOADED, ANSWER, DONE = 64, 65, 66, 70


def _s(data):
    return struct.pack("<I", len(data)) + data


def _frame(kind, body=b""):
    return struct.pack("<IB", len(body) + 1, kind) + body


class Child:
    def __init__(self, cpu=None):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        fd = theirs.fileno()
        env = dict(os.environ, ROOMKIT_WIRE_FD="3", ROOMKIT_WIRE_VERSIONS="1", ROOMKIT_PLUGIN_NAME="bench-noop-py",
                   PYTHONPATH=SDK)
        command = [sys.executable, PLUGIN]
        if cpu is not None:
            command = ["taskset", "-c", str(cpu)] + command
        self.process = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, pass_fds=[3],
                                        preexec_fn=lambda: os.dup2(fd, 3) if fd != 3 else None)
        theirs.close()
        self.sock = ours
        self.buffer = b""

    def frames(self):
        """Blocks for at least one frame; returns every complete one."""
        while True:
            got = []
            while len(self.buffer) >= 5:
                length, kind = struct.unpack_from("<IB", self.buffer, 0)
                if len(self.buffer) - 4 < length:
                    break
                got.append((kind, self.buffer[5:4 + length]))
                self.buffer = self.buffer[4 + length:]
            if got:
                return got
            data = self.sock.recv(1 << 20)
            if not data:
                raise EOFError("the plugin closed the wire")
            self.buffer += data

    def expect(self, kind):
        for got, body in self.frames():
            if got == kind:
                return body
        return self.expect(kind)

    def close(self):
        self.sock.sendall(_frame(UNLOAD))
        self.sock.close()
        self.process.wait(timeout=10)


def events_per_second(events, batch, window, cpu=None):
    child = Child(cpu)
    child.expect(HELLO)
    child.sock.sendall(_frame(LOAD, struct.pack("<I", 50) + _s(b"null")))
    child.expect(LOADED)
    room = b"lobby"
    frames = []
    seq = 0
    for start in range(0, events, batch):
        records = []
        for _ in range(min(batch, events - start)):
            seq += 1
            payload = b'{"room":"lobby","from":2,"event":"chat","payload":"hello","seq":%d}' % seq
            records.append(struct.pack("<BQq", 1, seq, 8) + _s(room) + _s(payload))
        frames.append(_frame(EVENTS, struct.pack("<I", len(records)) + b"".join(records)))
    last = seq
    bytes_sent = sum(len(f) for f in frames)
    cpu_before = _child_cpu(child.process.pid)
    started = time.perf_counter()
    sent, done, per_frame = 0, 0, batch
    while done < last:
        while sent < len(frames) and (sent * per_frame) - done < window * per_frame:
            child.sock.sendall(frames[sent])
            sent += 1
        for kind, body in child.frames():
            if kind == DONE:
                done = max(done, struct.unpack_from("<Q", body, 0)[0])
    elapsed = time.perf_counter() - started
    cpu = _child_cpu(child.process.pid) - cpu_before
    urls = url_round_trips(child, 2_000)
    child.close()
    return {"events": last, "batch": batch, "seconds": round(elapsed, 3),
            "events_per_s": round(last / elapsed), "plugin_cpu_ns_per_event": round(cpu * 1e9 / last),
            "wire_bytes_per_event": round(bytes_sent / last, 1), **urls}


def url_round_trips(child, count):
    url = b"https://cdn.example/a.png"
    times = []
    for request in range(1, count + 1):
        frame = _frame(URL, struct.pack("<QI", request, 50_000) + _s(url))
        started = time.perf_counter()
        child.sock.sendall(frame)
        while True:
            kinds = [kind for kind, _ in child.frames()]
            if ANSWER in kinds:
                break
        times.append(time.perf_counter() - started)
    times.sort()
    return {"url_p50_us": round(times[len(times) // 2] * 1e6, 1), "url_p99_us": round(times[int(len(times) * 0.99)] * 1e6, 1)}


def _child_cpu(pid):
    with open("/proc/%d/stat" % pid) as file:
        fields = file.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def python_plugin(results, bench):
    """bench.py's workload: results["pythonplugin"]."""
    events = 200_000 if bench.QUICK else 1_000_000
    cpu = bench.CLIENT_CPU if bench.PIN else None
    results["pythonplugin"] = events_per_second(events, 1024, 4, cpu)
    # One record per EVENTS frame (a quiet bot: every event alone in its loop turn), 256 frames in flight.
    single = events_per_second(events // 10, 1, 256, cpu)
    results["pythonplugin"]["single_events_per_s"] = single["events_per_s"]
    results["pythonplugin"]["single_plugin_cpu_ns_per_event"] = single["plugin_cpu_ns_per_event"]
    bench.log(f"python plugin: {results['pythonplugin']}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--window", type=int, default=4, help="EVENTS frames in flight")
    options = parser.parse_args()
    print(json.dumps(events_per_second(options.events, options.batch, options.window)))


if __name__ == "__main__":
    main()
