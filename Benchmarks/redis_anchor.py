"""The Redis anchor of workload 4 (Benchmarks/bench.py): redis-server's
PUBLISH fan-out to M subscribers with a ~100-byte payload (the text of a
roomd magix push), next to roomd's fan-out to M raw members.

Publisher: `redis-benchmark` (64 PUBLISH pipelined on one connection);
subscribers: M `redis-cli subscribe` processes (the stock client, hiredis;
no Redis protocol is written here). The receivers are not the same program
as roomd's raw members (RoomKitLoop WebSocket connections), so the figure
to compare is each server's CPU per delivery (utime+stime from /proc /
deliveries), which does not depend on who receives; deliveries/s is shown
too. Skipped when redis-server or redis-benchmark is missing."""

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


def redis_fanout(members, publishes, log):
    if not (shutil.which("redis-server") and shutil.which("redis-benchmark") and shutil.which("redis-cli")):
        log("redis anchor skipped: redis-server, redis-benchmark or redis-cli not installed")
        return None
    port = 21000 + random.randrange(8000)
    server = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
                               "--loglevel", "warning"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subscribers = []
    try:
        time.sleep(0.5)
        subscribers = [subprocess.Popen(["redis-cli", "-p", str(port), "subscribe", "room-0"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                       for _ in range(members)]

        def subscribed():
            out = subprocess.run(["redis-cli", "-p", str(port), "pubsub", "numsub", "room-0"],
                                 capture_output=True, text=True).stdout.split()
            return int(out[-1]) if out else 0

        deadline = time.monotonic() + 30
        while subscribed() < members and time.monotonic() < deadline:
            time.sleep(0.1)
        cpu_before, started = cpu_seconds(server.pid), time.monotonic()
        subprocess.run(["redis-benchmark", "-p", str(port), "-q", "-n", str(publishes), "-c", "1", "-P", "64",
                        "publish", "room-0", PUSH], capture_output=True, text=True, timeout=600)
        elapsed, cpu = time.monotonic() - started, cpu_seconds(server.pid) - cpu_before
        still = subscribed()
        deliveries = publishes * still
        return {"members": members, "subscribed_after": still, "publishes": publishes,
                "deliveries_per_s": deliveries / elapsed, "cpu_s": cpu,
                "cpu_us_per_delivery": cpu / max(1, deliveries) * 1e6, "payload_bytes": len(PUSH)}
    finally:
        for process in subscribers:
            process.kill()
        server.kill()
        for process in subscribers + [server]:
            process.wait()
