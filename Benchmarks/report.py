"""Renders Benchmarks/bench.py's results as docs/BENCHMARKS.md."""

TARGETS = """\
Targets (goals for the benchmark to show, not test assertions): sessions in
one process >= 100,000; idle memory per session <= 2 KiB (<= 0.2x the peer);
room logins per second >= 20,000 (>= 5x); events/s through 3 plugins >=
300,000 (>= 5x); p99 dispatch latency at half load <= 2 ms; recovery after a
restart, 10k sessions, <= 5 s and >= 80% of the steady login rate; roomd
fan-out >= 300,000 deliveries/s; plugin overhead <= 50 ns per hook call;
bot restart: >= 99% of resumes invisible when the restart takes less than
the heartbeat timeout minus the time needed to resume."""


def number(value, digits=0):
    if value is None:
        return "n/a"
    if abs(value) >= 100 or digits == 0:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def ratio(ours, theirs):
    if not ours or not theirs:
        return "n/a"
    return f"{ours / theirs:.2f}x"


def verdict(ok):
    return "met" if ok else "**missed**"


def both(absolute, relative):
    """Verdict of a two-part target: the absolute figure, then the ratio."""
    return f"{verdict(absolute)}, {verdict(relative)}"


class Table:
    def __init__(self):
        self.rows = []

    def add(self, workload, metric, ours, peer, ratio_text, target, met):
        self.rows.append((workload, metric, ours, peer, ratio_text, target, met))

    def render(self):
        lines = ["| Workload | Metric | RoomKit | Python peer | Ratio (RoomKit / peer) | Target | Target met? |",
                 "|---|---|---:|---:|---:|---|---|"]
        for row in self.rows:
            lines.append("| " + " | ".join(row) + " |")
        return "\n".join(lines)


def sessions_rows(table, results, limits):
    sizes = sorted(results["sessions"], key=int)
    for size in sizes:
        entry = results["sessions"][size]
        ours, peer = entry.get("roomkit", {}), entry.get("peer", {})
        last = size == sizes[-1]
        label = f"1. Idle sessions, {int(size):,}"
        held = ours.get("sessions", 0)
        table.add(label, "sessions logged in (failed)", f"{held:,} ({ours.get('failed', 0)})",
                  f"{peer.get('sessions', 0):,} ({peer.get('failed', 0)})", ratio(held, peer.get("sessions")),
                  ">= 100,000" if last else "", verdict(held >= 100_000) if last else "")
        mine, theirs = ours.get("bytes_per_session"), peer.get("bytes_per_session")
        table.add(label, "RSS per session (VmRSS delta / N)", f"{number(mine)} B", f"{number(theirs)} B",
                  ratio(mine, theirs), "<= 2 KiB, <= 0.2x" if last else "",
                  both(mine is not None and mine <= 2048, bool(mine and theirs and mine / theirs <= 0.2)) if last else "")
        mine_t, theirs_t = ours.get("bytes_per_session_trimmed"), peer.get("bytes_per_session_trimmed")
        table.add(label, "RSS per session after malloc_trim", f"{number(mine_t)} B", f"{number(theirs_t)} B",
                  ratio(mine_t, theirs_t), "", "")
        mine_l, theirs_l = ours.get("logins_per_s"), peer.get("logins_per_s")
        table.add(label, "room logins per second", number(mine_l), number(theirs_l), ratio(mine_l, theirs_l),
                  ">= 20,000, >= 5x" if last else "",
                  both(bool(mine_l and mine_l >= 20_000), bool(mine_l and theirs_l and mine_l / theirs_l >= 5))
                  if last else "")
        cpu_a = ours["cpu_ns"] / max(1, ours["sessions"]) / 1000 if ours.get("cpu_ns") else None
        cpu_b = peer["cpu_ns"] / max(1, peer["sessions"]) / 1000 if peer.get("cpu_ns") else None
        table.add(label, "client CPU per login (us, all threads)", number(cpu_a, 1), number(cpu_b, 1),
                  ratio(cpu_a, cpu_b), "", "")
        if last and mine_l:
            limits.append(f"Logins at {int(size):,} sessions: {number(mine_l)}/s for RoomKit, "
                          f"{number(theirs_l)}/s for the peer, against the same roomd.")


def throughput_rows(table, results):
    ours, peer = results["throughput"].get("roomkit"), results["throughput"].get("peer")
    if not ours or not peer:
        return
    label = "2. Event throughput, 3 plugins"
    mine, theirs = ours["saturated"]["events_per_s"], peer["saturated"]["events_per_s"]
    table.add(label, "events/s at saturation (through the 3rd plugin)", number(mine), number(theirs),
              ratio(mine, theirs), ">= 300,000, >= 5x", both(mine >= 300_000, mine / theirs >= 5))
    cpu_a = ours["saturated"]["cpu_ns"] / max(1, ours["saturated"]["events"]) / 1000
    cpu_b = peer["saturated"]["cpu_ns"] / max(1, peer["saturated"]["events"]) / 1000
    table.add(label, "client CPU per event at saturation (us, all threads)", number(cpu_a, 1), number(cpu_b, 1),
              ratio(cpu_a, cpu_b), "", "")
    table.add(label, "roomd appends/s while saturated (x4 deliveries)", number(ours["sender"]["events_per_s"]),
              number(peer["sender"]["events_per_s"]), "", "", "")
    for key, name in (("p50_us", "p50"), ("p99_us", "p99"), ("p999_us", "p99.9")):
        a, b = ours["latency"]["latency"][key], peer["latency"]["latency"][key]
        target = "<= 2 ms" if key == "p99_us" else ""
        table.add(label, f"{name} dispatch latency at half load (us)", number(a, 1), number(b, 1), ratio(a, b),
                  target, verdict(a <= 2000) if target else "")
    table.add(label, "half load offered (events/s at the client)", number(ours["half_load"]),
              number(peer["half_load"]), "", "", "")


def recovery_rows(table, results):
    ours, peer = results["recovery"].get("roomkit"), results["recovery"].get("peer")
    if not ours or not peer:
        return
    size = ours["ready"]["sessions"]
    label = f"3. Recovery, kill -9, {size:,} sessions"
    table.add(label, "sessions RECONNECTED", f"{ours['recovered']['reconnected']:,}",
              f"{peer['recovered']['reconnected']:,}", "", "all", verdict(ours["recovered"]["reconnected"] >= size))
    a, b = ours["all_reconnected_s"], peer["all_reconnected_s"]
    table.add(label, "s from kill -9 until every session is RECONNECTED", number(a, 2), number(b, 2), ratio(a, b),
              "<= 5 s", verdict(a <= 5))
    table.add(label, "s from roomd listening again until all RECONNECTED", number(ours["after_listening_s"], 2),
              number(peer["after_listening_s"], 2), "", "", "")
    a, b = ours["resume_per_s"], peer["resume_per_s"]
    table.add(label, "resumes per second (while resuming: 10 ms slices with a RECONNECTED)", number(a), number(b),
              ratio(a, b), "", "")
    table.add(label, "s from first to last RECONNECTED (backoff jitter spreads it)", number(ours["resume_span_s"], 2),
              number(peer["resume_span_s"], 2), "", "", "")
    a, b = ours["resume_vs_login"], peer["resume_vs_login"]
    table.add(label, "resume rate / steady login rate", f"{a:.0%}", f"{b:.0%}", "", ">= 80%", verdict(a >= 0.8))


def fanout_rows(table, results):
    best = 0
    for members in sorted(results["fanout"], key=int):
        entry = results["fanout"][members]
        ours, peer = entry.get("roomkit"), entry.get("peer")
        if not ours or not peer:
            continue
        label = f"4. roomd fan-out, rooms of {int(members):,}"
        a, b = ours["delivered"]["events_per_s"], peer["delivered"]["events_per_s"]
        best = max(best, a)
        table.add(label, "deliveries/s received by the members (members = connections)", number(a),
                  number(b), ratio(a, b), ">= 300,000", verdict(a >= 300_000))
        raw = entry.get("raw")
        if raw:
            r = raw["delivered"]["events_per_s"]
            table.add(label, "same, raw members (frames counted, not parsed; one run, shown in both columns)",
                      number(r), number(r), "", "", "")
        cpu_a = ours["delivered"]["cpu_ns"] / max(1, ours["delivered"]["events"]) / 1000
        cpu_b = peer["delivered"]["cpu_ns"] / max(1, peer["delivered"]["events"]) / 1000
        table.add(label, "receiving client CPU per delivery (us)", number(cpu_a, 1), number(cpu_b, 1),
                  ratio(cpu_a, cpu_b), "", "")
        table.add(label, "roomd events/s (appends)", number(ours["sender"]["events_per_s"]),
                  number(peer["sender"]["events_per_s"]), "", "", "")
        table.add(label, "connections held by roomd (sessions)",
                  f"{ours['connections_held']:,} ({ours['ready']['sessions']:,})",
                  f"{peer['connections_held']:,} ({peer['ready']['sessions']:,})", "", "", "")


def plugin_rows(table, results):
    ours, peer = results["plugins"].get("roomkit"), results["plugins"].get("peer")
    if not ours or not peer:
        return
    label = "5. Plugin overhead"
    table.add(label, "ns per hook call, C ABI (descriptor function pointer)", number(ours["c_abi_ns"], 1),
              number(peer["call_ns"], 1), ratio(ours["c_abi_ns"], peer["call_ns"]), "<= 50 ns",
              verdict(ours["c_abi_ns"] <= 50))
    table.add(label, "ns per hook call, Swift SDK (75-byte payload; peer: json.loads + call)",
              number(ours["swift_sdk_ns"], 1), number(peer["decode_call_ns"], 1),
              ratio(ours["swift_sdk_ns"], peer["decode_call_ns"]), "<= 50 ns", verdict(ours["swift_sdk_ns"] <= 50))
    table.add(label, "ns per hook call, Swift SDK, payload `{}`", number(ours["swift_sdk_empty_payload_ns"], 1), "",
              "", "", "")
    table.add(label, "ns per hook call through PluginManager, C plugin: wall / CPU (peer: loop over 3 handlers)",
              f"{number(ours['manager_c_wall_ns'])} / {number(ours['manager_c_cpu_ns'])}",
              number(peer["dispatch_ns"], 1), ratio(ours["manager_c_wall_ns"], peer["dispatch_ns"]), "", "")
    table.add(label, "ns per hook call through PluginManager, Swift SDK plugin: wall / CPU",
              f"{number(ours['manager_swift_wall_ns'])} / {number(ours['manager_swift_cpu_ns'])}", "", "", "", "")


def bot_restart_rows(table, results):
    ours = results.get("botrestart", {}).get("roomkit")
    if not ours:
        return
    label = f"7. Bot restart, roombot kill -9, {ours['rooms']:,} rooms"
    table.add(label, "s from process start until every room is resumed (LOGINED)", number(ours["all_resumed_s"], 1),
              "", "", "", "")
    table.add(label, "s for the first start (fresh logins), for comparison", number(ours["first_start_s"], 1),
              "", "", "", "")
    table.add(label, "resumes answered recovered:true (resync events)",
              f"{ours['recovered']:,} ({ours['resync']:,})", "", "", "all", verdict(ours["recovered"] >= ours["rooms"]))
    table.add(label, f"resumes invisible to the other members (heartbeat timeout {ours['heartbeat_timeout_s']} s)",
              f"{ours['invisible_fraction']:.1%}", "", "", ">= 99%", verdict(ours["invisible_fraction"] >= 0.99))
    short = results["botrestart"].get("roomkit_short")
    if short:
        table.add(label, f"same with a heartbeat timeout shorter than the resume ({short['heartbeat_timeout_s']} s): "
                  "invisible, recovered", f"{short['invisible_fraction']:.1%}, {short['recovered']:,}", "", "", "", "")


def isolation_rows(table, results):
    iso = results.get("isolation")
    if not iso:
        return
    label = "6. Plugin isolation (process vs inline)"
    for count in (1, 3):
        p, i = iso[f"process_{count}"], iso[f"inline_{count}"]
        target = ">= 200,000" if count == 1 else ""
        table.add(label, f"events/s to {count} plugin(s), no-op C (process / inline)", number(p["events_per_s"]),
                  number(i["events_per_s"]), ratio(p["events_per_s"], i["events_per_s"]), target,
                  verdict(p["events_per_s"] >= 200_000) if count == 1 else "")
        table.add(label, f"ns per hook, {count} plugin(s): wall / bot CPU / plugin CPU (process / inline)",
                  f"{number(p['wall_ns_per_hook'])} / {number(p['bot_cpu_ns_per_hook'])} / {number(p['plugin_cpu_ns_per_hook'])}",
                  f"{number(i['wall_ns_per_hook'])} / {number(i['bot_cpu_ns_per_hook'])}", "", "", "")
    p, i = iso["process_url"], iso["inline_url"]
    table.add(label, "urlInterrupter round trip p50 (us, process / inline)", number(p["p50_us"], 1), number(i["p50_us"], 1),
              ratio(p["p50_us"], i["p50_us"]), "", "")
    table.add(label, "urlInterrupter round trip p99 (us, process / inline)", number(p["p99_us"], 1), number(i["p99_us"], 1),
              ratio(p["p99_us"], i["p99_us"]), "<= 200 us", verdict(p["p99_us"] <= 200))


def render(results, command):
    machine = results["machine"]
    table = Table()
    limits = []
    sessions_rows(table, results, limits)
    throughput_rows(table, results)
    recovery_rows(table, results)
    fanout_rows(table, results)
    plugin_rows(table, results)
    isolation_rows(table, results)
    bot_restart_rows(table, results)
    quick = " (BENCH_QUICK smoke run: smaller sizes, not the real figures)" if results["quick"] else ""
    from notes import NOTES, METHOD
    return f"""# Benchmarks

RoomKit next to what a user would pick instead: a Python asyncio bot on the
`websockets` library (`Benchmarks/peers/roomkit_peer.py`), speaking the same
protocol to the same release-built `roomd`, in the same run. Absolute times
on a shared machine drift; read the ratios.

Written by `{command}`{quick}; do not edit by hand.

## Machine and run

| | |
|---|---|
| Date | {machine['date']} |
| Command | `{command}` (took {results.get('elapsed_s', 0):.0f} s, builds not counted) |
| Machine | {machine['nproc']} cores, {machine['cpu']}, {machine['ram_gib']:.1f} GiB RAM, Linux {machine['kernel']} |
| Shared | yes: other engineers' builds and tests ran on the same 2 cores during the run |
| RoomKit | revision {machine['revision']}, {machine['swift']}, release build |
| Peer | Python {machine['python']}, websockets {machine['websockets']}, default asyncio event loop, stdlib json |

## Results

Ratios are RoomKit / peer: above 1x is better for rates, below 1x is better
for memory, CPU, latency and times.

{table.render()}

{TARGETS}

{METHOD}

## What limits us / what is left

{NOTES}
"""
