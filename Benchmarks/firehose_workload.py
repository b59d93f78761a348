"""Workload 6, the client engines on their own (Benchmarks/bench.py): each
client logs in to 100 rooms of `roomkit-bench firehose`, a server on
RoomKitLoop that stores nothing and pushes pre-encoded magix events as fast
as the socket takes them, so the client, not roomd, is what is measured.
RoomKit runs the 3 C plugins of workload 2 (PluginManager, the probe
third); each peer its 3 handler functions."""

import json
import os
import subprocess
import time


class Firehose:
    """`roomkit-bench firehose` as a child process (the `url` a Client needs)."""

    def __init__(self, bench, duration):
        self.process = subprocess.Popen(bench.pinned(
            [os.path.join(bench.BIN, "roomkit-bench"), "firehose", "--duration", str(duration), "--delay", "1"],
            bench.SERVER_CPU),
            stdout=subprocess.PIPE, stderr=open(os.path.join(bench.LOGS, "firehose.log"), "a"), text=True)
        line = self.process.stdout.readline()
        if not line.startswith("listening on"):
            raise RuntimeError(f"firehose did not start: {line!r}")
        self.port = int(line.strip().rsplit(":", 1)[1])

    @property
    def url(self):
        return f"ws://127.0.0.1:{self.port}/v1/rooms"

    def result(self):
        line = self.process.stdout.readline()
        self.process.wait(timeout=30)
        return json.loads(line) if line else {}


def firehose(results, bench):
    duration = 3 if bench.QUICK else 5
    runs = 1  # bench.py repeats the whole set BENCH_RUNS times
    for side in bench.SIDES:
        entries = []
        for _ in range(runs):
            source = Firehose(bench, duration)
            client = bench.Client(side, "firehose", source, connections=1, rooms=100, shared=1, plugins=3)
            ready = client.read()
            client.ask("mark")
            time.sleep(1.5)  # the firehose starts 1 s after the last login; "report" waits until it stops
            seen = client.ask("report")
            client.quit()
            pushed = source.result()
            entries.append({"ready": ready, "report": seen, "source": pushed,
                            "cpu_us_per_event": seen["cpu_ns"] / max(1, seen["events"]) / 1000})
            bench.log(f"firehose {side}: {seen['events_per_s']:.0f} events/s through 3 plugins, "
                      f"{entries[-1]['cpu_us_per_event']:.2f} us CPU per event")
        results["firehose"][side] = entries
    # The same engine with no plugin at all (events counted by an observer,
    # which the 3-plugin run has too): the difference, per plugin, is the
    # amortised cost of one inline hook call under load (payload, dispatch,
    # the plugin's own no-op call), issue 17's "plugin dispatch" figure.
    source = Firehose(bench, duration)
    client = bench.Client("roomkit", "firehose", source, connections=1, rooms=100, shared=1, plugins=0)
    client.read()
    client.ask("mark")
    time.sleep(1.5)
    seen = client.ask("report")
    client.quit()
    source.result()
    bare = seen["cpu_ns"] / max(1, seen["events"]) / 1000
    results["firehose"]["roomkit_bare"] = [{"report": seen, "cpu_us_per_event": bare}]
    bench.log(f"firehose roomkit, no plugins: {seen['events_per_s']:.0f} events/s, {bare:.2f} us CPU per event")
