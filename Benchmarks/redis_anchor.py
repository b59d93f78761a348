"""The Redis anchor of workload 4 (Benchmarks/bench.py): redis-server's
PUBLISH fan-out to M subscribers with a ~100-byte payload (the text of a
roomd magix push), next to roomd's fan-out to M raw members.

Publisher: `redis-benchmark` (64 PUBLISH pipelined on one connection).
Subscribers: `roomkit-bench redis-sink`, M hiredis connections on one
RoomKitLoop event loop (RoomKitRedis; no Redis protocol is written here),
which count messages the way `roomkit-bench sink` counts roomd's frames: the
same receiving program for both servers, on the same CPU, so deliveries/s
compare. Each server's CPU per delivery (utime+stime from /proc /
deliveries) is shown too. Skipped when redis-server or redis-benchmark is
missing."""

import json
import os
import random
import shutil
import subprocess
import time

PUSH = ('{"event":"bench","from":1,"op":"magix","payload":{"t":1000000000000},'
        '"room":"room-0","seq":1234}')


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def redis_fanout(bench, members, publishes):
    if not (shutil.which("redis-server") and shutil.which("redis-benchmark")):
        bench.log("redis anchor skipped: redis-server or redis-benchmark not installed")
        return None
    port = 21000 + random.randrange(8000)
    server = subprocess.Popen(bench.pinned(["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
                                            "--loglevel", "warning"], bench.SERVER_CPU),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sink = None
    try:
        time.sleep(0.5)
        sink = subprocess.Popen(bench.pinned([os.path.join(bench.BIN, "roomkit-bench"), "redis-sink", "--port", str(port),
                                              "--connections", str(members), "--channel", "room-0"], bench.CLIENT_CPU),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=open(os.path.join(bench.LOGS, "redis-sink.log"), "a"), text=True)

        def ask(command=None):
            if command:
                sink.stdin.write(command + "\n")
                sink.stdin.flush()
            line = sink.stdout.readline()
            if not line:
                raise RuntimeError(f"redis-sink exited ({sink.wait()})")
            return json.loads(line)

        ask()  # ready: every connection subscribed
        ask("mark")
        cpu_before = cpu_seconds(server.pid)
        subprocess.run(bench.pinned(["redis-benchmark", "-p", str(port), "-q", "-n", str(publishes), "-c", "1",
                                     "-P", "64", "publish", "room-0", PUSH], bench.SERVER_CPU),
                       capture_output=True, text=True, timeout=600)
        cpu = cpu_seconds(server.pid) - cpu_before
        seen = ask("report")
        return {"members": members, "subscribed_after": members, "publishes": publishes, "receiver": "redis-sink",
                "deliveries": seen["events"], "deliveries_per_s": seen["events_per_s"],
                "cpu_s": cpu,
                "cpu_us_per_delivery": cpu / max(1, seen["events"]) * 1e6, "payload_bytes": len(PUSH),
                "sink_cpu_us_per_delivery": seen["cpu_ns"] / max(1, seen["events"]) / 1000}
    finally:
        if sink:
            sink.kill()
            sink.wait()
        server.kill()
        server.wait()
