"""`make bench-ab BASE=<revision>`: is a change a regression? This runs
the same workloads with two builds, the base revision's and the working
tree's, alternating on the same machine in the same minutes, and prints
both sides' medians (min-max) and the paired ratio.

Why: `make bench` pages are days apart on a shared 2-core machine, and the
same binary moves by half between them (2026-11-27: revision 69d6436's
client took 2.18 us per firehose event on its own page and 3.52 us in an
A/B run). Only two builds measured side by side say whether code got
slower. A page's figure against an older page's says nothing more.

Workloads (each as `make bench` runs it, so the figures are the page's):
  firehose  workload 6: client CPU per event with 3 inline plugins and with
            none, and the amortised hook ((3 plugins - none) / 3);
  logins    workload 1's logins/s at LOGINS rooms (default 100,000, 8
            connections), each build's roomd and client together;
  latency   workload 2's p50 and p99 dispatch latency at half load, each
            build's client (3 inline plugins) against the head's roomd.

The base is built in a detached worktree (Benchmarks/.build/ab-<rev>),
release, its roomd and roomkit-bench only; the head's are the working
tree's release build (built here). Its bench client must take the options
the bench passes today (true since 2026-11-26).

Environment: AB_ROUNDS (default 6; sides alternate first each round),
AB_WORKLOADS (default "firehose,logins,latency"), AB_LOGINS (default 100000).
Writes Benchmarks/.build/ab-results.json.
"""

import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
from firehose_workload import Firehose  # noqa: E402

SWIFT = os.environ.get("SWIFT", "swift")
PRODUCTS = ("roomd", "roomkit-bench")


def build(package_root):
    """Release-builds the bench's roomd and client of the package at `package_root`; returns their folder."""
    here = os.path.join(package_root, "Benchmarks")
    for product in PRODUCTS:
        subprocess.run([SWIFT, "build", "-c", "release", "--package-path", here, "--product", product], check=True)
    return os.path.join(here, ".build", "release")


def base_tree(revision):
    """A detached worktree at `revision` (made once, reused)."""
    commit = subprocess.run(["git", "-C", bench.ROOT, "rev-parse", "--short", revision], check=True,
                            capture_output=True, text=True).stdout.strip()
    path = os.path.join(bench.HERE, ".build", f"ab-{commit}")
    if not os.path.isdir(path):
        subprocess.run(["git", "-C", bench.ROOT, "worktree", "add", "--detach", path, commit], check=True)
    return commit, path


def client(binary, name, source, **options):
    """`bench.Client` running the `roomkit-bench` in `binary`."""
    saved = bench.BIN
    bench.BIN = binary
    try:
        return bench.Client("roomkit", name, source, **options)
    finally:
        bench.BIN = saved


def firehose_cpu(binary, plugins):
    """Client CPU per event (us, all threads) against the firehose, as workload 6 runs it."""
    source = Firehose(bench, 5)
    bot = client(binary, "ab-firehose", source, connections=1, rooms=100, shared=1, plugins=plugins)
    bot.read()
    bot.ask("mark")
    time.sleep(1.5)
    seen = bot.ask("report")
    bot.quit()
    source.result()
    return seen["cpu_ns"] / max(1, seen["events"]) / 1000


def firehose(binary):
    with_plugins = firehose_cpu(binary, 3)
    bare = firehose_cpu(binary, 0)
    return {"client CPU per event, 3 plugins (us)": with_plugins,
            "client CPU per event, no plugin (us)": bare,
            "amortised inline hook (ns)": (with_plugins - bare) / 3 * 1000}


def logins(binary):
    size = int(os.environ.get("AB_LOGINS", "100000"))
    saved = bench.BIN
    bench.BIN = binary
    try:
        roomd = bench.Roomd("ab-logins")
    finally:
        bench.BIN = saved
    bot = client(binary, "ab-logins", roomd, connections=8, rooms=size // 8)
    ready = bot.read()
    bot.quit()
    time.sleep(0.5)
    roomd.stop()
    if ready.get("failed"):
        raise RuntimeError(f"{ready['failed']} logins failed")
    return {f"logins/s at {size:,} rooms": ready["logins_per_s"]}


def latency(binary):
    """Workload 2's dispatch latency at half load: each build's client with
    3 inline plugins (the probe stamps each event), against the head's roomd
    and sender, so that only the client differs."""
    connections, rooms, duration = 4, 100, 6
    roomd = bench.Roomd("ab-latency")
    bot = client(binary, "ab-latency", roomd, connections=connections, rooms=rooms, shared=1, plugins=3, latency=1)
    bot.read()
    bot.ask("mark")
    bench.send(roomd, rooms, duration)
    saturated = bot.ask("report")
    bot.ask("mark")
    bench.send(roomd, rooms, duration, rate=saturated["events_per_s"] / 2 / connections)
    seen = bot.ask("report")
    bot.quit()
    roomd.stop()
    return {"p50 dispatch latency at half load (us)": seen["latency"]["p50_us"],
            "p99 dispatch latency at half load (us)": seen["latency"]["p99_us"]}


WORKLOADS = {"firehose": firehose, "logins": logins, "latency": latency}


def number(value):
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def spread(values):
    return f"{number(statistics.median(values))} ({number(min(values))}-{number(max(values))})"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: ab.py BASE_REVISION (make bench-ab BASE=...)")
    rounds = int(os.environ.get("AB_ROUNDS", "6"))
    chosen = [name.strip() for name in os.environ.get("AB_WORKLOADS", "firehose,logins,latency").split(",") if name.strip()]
    unknown = [name for name in chosen if name not in WORKLOADS]
    if unknown:
        sys.exit(f"AB_WORKLOADS: unknown workload(s) {', '.join(unknown)} (known: {', '.join(WORKLOADS)})")
    os.makedirs(bench.LOGS, exist_ok=True)
    commit, path = base_tree(sys.argv[1])
    head = subprocess.run(["git", "-C", bench.ROOT, "rev-parse", "--short", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", bench.ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip() != ""
    head_label = head + ("+changes" if dirty else "")
    sides = {"base": build(path), "head": build(bench.ROOT)}
    samples = {side: {} for side in sides}
    for round_ in range(rounds):
        order = ["base", "head"] if round_ % 2 == 0 else ["head", "base"]
        for name in chosen:
            for side in order:
                figures = WORKLOADS[name](sides[side])
                for metric, value in figures.items():
                    samples[side].setdefault(metric, []).append(value)
                bench.log(f"round {round_ + 1}/{rounds} {name} {side}: "
                          + ", ".join(f"{metric} {number(value)}" for metric, value in figures.items()))
    print(f"\nA/B, {rounds} rounds alternating, base {commit}, head {head_label}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print("| figure | base | head | head / base (paired, median) |")
    print("|---|---|---|---|")
    rows = []
    for metric in samples["base"]:
        base, new = samples["base"][metric], samples["head"][metric]
        ratios = [h / b for b, h in zip(base, new) if b]
        row = {"figure": metric, "base": base, "head": new, "ratio_median": statistics.median(ratios) if ratios else None}
        rows.append(row)
        ratio = f"{row['ratio_median']:.2f}x ({min(ratios):.2f}-{max(ratios):.2f})" if ratios else "n/a"
        print(f"| {metric} | {spread(base)} | {spread(new)} | {ratio} |")
    with open(os.path.join(bench.HERE, ".build", "ab-results.json"), "w") as out:
        json.dump({"base": commit, "head": head_label, "rounds": rounds, "rows": rows}, out, indent=1)


if __name__ == "__main__":
    main()
