"""Renders Benchmarks/bench.py's results as docs/BENCHMARKS.md."""

TARGETS = """\
Targets (goals for the benchmark to show, not test assertions): sessions in
one process >= 100,000; idle memory per session <= 2 KiB (<= 0.2x the peer);
room logins per second >= 20,000 (>= 5x); events/s through 3 plugins >=
300,000 (>= 5x); p99 dispatch latency at half load <= 2 ms; recovery after a
restart, 10k sessions, <= 5 s and >= 80% of the steady login rate; roomd
fan-out >= 300,000 deliveries/s; plugin overhead <= 50 ns per hook call;
bot restart: >= 99% of resumes invisible when the restart takes less than
the heartbeat timeout minus the time needed to resume.
Issue 17: >= 100,000 durable appends/s; one bot on one service connection
to a default roomd: >= 20,000 logins/s, 100,000 rooms in <= 10 s, all
resumed well inside the 90 s heartbeat timeout after kill -9; roomd fan-out
>= 1,000,000 deliveries/s in rooms of 100 and 1,000 (roomd CPU per delivery
<= 1 us) and >= 0.5x Redis PUBLISH; client CPU per event against the
firehose <= 1 us and <= 0.1x the peer."""


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


def roomd_rows(table, results):
    roomd = results.get("roomd") or {}
    runs = roomd.get("appends")
    if runs:
        label = "0. roomd alone: durable appends"
        rates = sorted(run["appends_per_s"] for run in runs)
        median = rates[len(rates) // 2]
        table.add(label, f"appends/s, ~100-byte magix, 2 senders x 5,000 in flight (median of {len(rates)}; min-max)",
                  f"{number(median)} ({number(rates[0])}-{number(rates[-1])})", "n/a", "", ">= 100,000",
                  verdict(median >= 100_000))
        cpus = sorted(run["roomd_cpu_us_per_append"] for run in runs)
        table.add(label, "roomd CPU per append (us, all threads; median, min-max)",
                  f"{number(cpus[len(cpus) // 2], 1)} ({number(cpus[0], 1)}-{number(cpus[-1], 1)})", "n/a", "", "", "")
    both_sides = roomd.get("service_logins") or {}
    if "ready" in both_sides:  # a results.json from before the peer was measured here
        both_sides = {"roomkit": both_sides}
    logins, other = both_sides.get("roomkit"), both_sides.get("peer") or {}
    if logins:
        ready, size = logins["ready"], logins["ready"]["sessions"] + logins["ready"]["failed"]
        peer_ready = other.get("ready") or {}
        label = f"0. roomd alone: one bot, {size:,} rooms, one service connection, default roomd"
        a, b = ready["logins_per_s"], peer_ready.get("logins_per_s")
        table.add(label, "room logins per second (end to end)", number(a), number(b), ratio(a, b), ">= 20,000",
                  verdict(a >= 20_000))
        table.add(label, "s until every room is LOGINED (failed)", f"{number(ready['login_s'], 2)} ({ready['failed']})",
                  f"{number(peer_ready.get('login_s'), 2)} ({peer_ready.get('failed', 'n/a')})",
                  ratio(ready["login_s"], peer_ready.get("login_s")), "<= 10 s",
                  verdict(ready["login_s"] <= 10 and ready["failed"] == 0))
        resumed, peer_resumed = logins["all_reconnected_s"], other.get("all_reconnected_s")
        table.add(label, "s from kill -9 until every room is RECONNECTED (heartbeat timeout 90 s)",
                  f"{number(resumed, 2)} ({logins['recovered']['reconnected']:,} of {ready['sessions']:,})",
                  f"{number(peer_resumed, 2)} ({other.get('recovered', {}).get('reconnected', 0):,})",
                  ratio(resumed, peer_resumed), "<= 45 s",
                  verdict(bool(resumed) and resumed <= 45 and logins["recovered"]["reconnected"] >= ready["sessions"]))
        per = (logins["roomd_rss"] - logins["roomd_rss_before"]) / max(1, ready["sessions"])
        table.add(label, "roomd RSS per session, attached (VmRSS delta / N)", f"{number(per)} B", "n/a", "", "", "")


def firehose_rows(table, results):
    fire = results.get("firehose") or {}
    ours, peer = fire.get("roomkit"), fire.get("peer")
    if not ours or not peer:
        return
    label = "6. Client engine alone: firehose source, 100 rooms, 3 plugins"

    def spread(entries, value):
        values = sorted(value(entry) for entry in entries)
        return values[len(values) // 2], values[0], values[-1]

    def shown(triple, digits=0):
        median, low, high = triple
        return number(median, digits) if low == high else \
            f"{number(median, digits)} ({number(low, digits)}-{number(high, digits)})"

    rate_a = spread(ours, lambda entry: entry["report"]["events_per_s"])
    rate_b = spread(peer, lambda entry: entry["report"]["events_per_s"])
    table.add(label, f"events/s through the 3rd plugin (median of {len(ours)}; min-max)", shown(rate_a),
              shown(rate_b), ratio(rate_a[0], rate_b[0]), "", "")
    cpu_a = spread(ours, lambda entry: entry["cpu_us_per_event"])
    cpu_b = spread(peer, lambda entry: entry["cpu_us_per_event"])
    table.add(label, "client CPU per event (us, all threads; median, min-max)", shown(cpu_a, 2), shown(cpu_b, 2),
              ratio(cpu_a[0], cpu_b[0]), "<= 1 us, <= 0.1x", both(cpu_a[0] <= 1, cpu_a[0] / cpu_b[0] <= 0.1))


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
        for key, what in (("roomd_rss", "attached"), ("roomd_rss_retained", "retained idle (client gone)")):
            if ours.get(key) and ours.get("roomd_rss_before"):
                a = (ours[key] - ours["roomd_rss_before"]) / max(1, held)
                b = ((peer[key] - peer["roomd_rss_before"]) / max(1, peer.get("sessions", 1))
                     if peer.get(key) and peer.get("roomd_rss_before") else None)
                table.add(label, f"roomd RSS per session, {what} (VmRSS delta / N; same roomd for both)",
                          f"{number(a)} B", f"{number(b)} B", "", "", "")
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
            if raw.get("roomd_cpu_s") and raw["delivered"].get("events"):
                per = raw["roomd_cpu_s"] / raw["delivered"]["events"] * 1e6
                table.add(label, "roomd CPU per delivery to raw members (us, all threads; its capacity on one core "
                          "= 1e6 / this)", number(per, 2), "n/a", "", "<= 1 us (1,000,000/s)", verdict(per <= 1))
                redis = entry.get("redis")
                if redis:
                    anchor = redis["cpu_us_per_delivery"]
                    table.add(label, f"anchor: redis-server PUBLISH to {redis['subscribed_after']} redis-cli "
                              f"subscribers, {redis['payload_bytes']}-byte payload: deliveries/s",
                              number(raw["delivered"]["events_per_s"]), f"Redis {number(redis['deliveries_per_s'])}",
                              ratio(raw["delivered"]["events_per_s"], redis["deliveries_per_s"]), "", "")
                    table.add(label, "anchor: server CPU per delivery, Redis / roomd (roomd's rate per core / Redis's)",
                              number(per, 2), f"Redis {number(anchor, 2)}", f"{anchor / per:.2f}x", ">= 0.5x",
                              verdict(anchor / per >= 0.5))
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
    label = f"8. Bot restart, roombot kill -9, {ours['rooms']:,} rooms"
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
    label = "7. Plugin isolation (process vs inline)"
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


def unit(metric, value):
    """The unit of a figure, read off its metric and value text."""
    if value.endswith(" B") or "RSS" in metric:
        return "bytes"
    for marker, name in (("(us", "us"), ("(ns", "ns"), ("ns per", "ns"), ("per second", "1/s"), ("/s", "1/s"),
                         ("s from", "s"), ("s until", "s"), ("rate /", "ratio")):
        if marker in metric:
            return name
    return "count"


def figures(results):
    """Every table row as data, for Benchmarks/.build/results.json."""
    table, _ = build(results)
    return [{"workload": row[0], "metric": row[1], "roomkit": row[2], "peers": {"python": row[3]},
             "ratio": row[4], "target": row[5], "met": row[6], "unit": unit(row[1], row[2])}
            for row in table.rows]


def build(results):
    table = Table()
    limits = []
    roomd_rows(table, results)
    sessions_rows(table, results, limits)
    throughput_rows(table, results)
    recovery_rows(table, results)
    fanout_rows(table, results)
    plugin_rows(table, results)
    firehose_rows(table, results)
    isolation_rows(table, results)
    bot_restart_rows(table, results)
    return table, limits


def render(results, command):
    machine = results["machine"]
    table, limits = build(results)
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
