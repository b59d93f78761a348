"""Renders Benchmarks/bench.py's results as docs/BENCHMARKS.md."""

import re

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
firehose <= 1 us and <= 0.1x the peer.
Issue 25: a no-op Python plugin over the wire >= 100,000 events/s."""


class Fig(str):
    """A table cell: its text, and the number it shows (`value`, None when
    it shows none) with the digits it was printed with, so the runs of a
    figure can be merged into a median and min-max."""

    def __new__(cls, text, value=None, digits=0):
        cell = super().__new__(cls, text)
        cell.value = value
        cell.digits = digits
        return cell


def number(value, digits=0):
    if value is None:
        return Fig("n/a")
    if abs(value) >= 100 or digits == 0:
        return Fig(f"{value:,.0f}", value, 0)
    return Fig(f"{value:,.{digits}f}", value, digits)


def ratio(ours, theirs):
    if not ours or not theirs:
        return Fig("n/a")
    return Fig(f"{ours / theirs:.2f}x", ours / theirs, 2)


def verdict(ok):
    return "met" if ok else "**missed**"


def both(absolute, relative):
    """Verdict of a two-part target: the absolute figure, then the ratio."""
    return f"{verdict(absolute)}, {verdict(relative)}"


PEERS = ("python", "nio")
PEER_NAMES = {"python": "Python peer", "nio": "NIO peer"}


class Table:
    """The rows of one run. A row: workload, metric, RoomKit's cell, each
    peer's cell and ratio (RoomKit / peer), target, verdict."""

    def __init__(self):
        self.rows = []

    def add(self, workload, metric, ours, peer, ratio_text, target, met, nio=None, nio_ratio=None, peer_name="python"):
        peers = {peer_name: peer}
        ratios = {peer_name: ratio_text}
        if nio is not None:
            peers["nio"] = nio
            ratios["nio"] = nio_ratio if nio_ratio is not None else ""
        self.rows.append({"workload": workload, "metric": metric, "roomkit": ours, "peers": peers, "ratios": ratios,
                          "target": target, "met": met})


def merge(tables):
    """One row per figure over the runs: the median run's text with min-max
    when the runs differ. The verdict is the one of the run whose RoomKit
    value is the median, except for a target on a ratio (the median ratio's)."""
    order, cells = [], {}
    for table in tables:
        for row in table.rows:
            key = (row["workload"], row["metric"])
            if key not in cells:
                order.append(key)
                cells[key] = []
            cells[key].append(row)
    merged = []
    for key in order:
        rows = cells[key]
        pick = median_row(rows)
        row = {"workload": key[0], "metric": key[1], "runs": len(rows), "target": pick["target"], "met": pick["met"],
               "roomkit": spread([r["roomkit"] for r in rows]), "peers": {}, "ratios": {}}
        for name in {name for r in rows for name in r["peers"]}:
            row["peers"][name] = spread([r["peers"].get(name, "") for r in rows])
            row["ratios"][name] = spread([r["ratios"].get(name, "") for r in rows])
        on_ratio = re.fullmatch(r">= ([0-9.]+)x( \w+)?", row["target"])
        if on_ratio and len(row["ratios"]) == 1:
            # A target on the ratio itself (the Redis anchor, process against
            # inline): the verdict of the median ratio, not of the run with
            # the median RoomKit value.
            ratio_median = next(iter(row["ratios"].values()))["median"]
            if ratio_median is not None:
                row["met"] = verdict(ratio_median >= float(on_ratio.group(1)))
        merged.append(row)
    return merged


def median_row(rows):
    valued = [r for r in rows if getattr(r["roomkit"], "value", None) is not None]
    if not valued:
        return rows[0]
    valued.sort(key=lambda r: r["roomkit"].value)
    return valued[(len(valued) - 1) // 2]


def spread(cells):
    """{"text", "median", "min", "max", "values"} of one cell over the runs."""
    values = [getattr(cell, "value", None) for cell in cells]
    numbers = sorted(v for v in values if v is not None)
    if not numbers:
        return {"text": str(cells[0]) if cells else "", "median": None, "min": None, "max": None, "values": values}
    median = numbers[(len(numbers) - 1) // 2]
    text = next(str(cell) for cell, value in zip(cells, values) if value == median)
    digits = max(getattr(cell, "digits", 0) for cell in cells)
    if len(numbers) > 1 and numbers[0] != numbers[-1]:
        low, high = number(numbers[0], digits), number(numbers[-1], digits)
        if str(low) != str(high):
            text += f" ({low}-{high})"
    return {"text": text, "median": median, "min": numbers[0], "max": numbers[-1], "values": values}


def render_table(merged):
    lines = ["| Workload | Metric | RoomKit | Python peer | NIO peer | RoomKit / Python | RoomKit / NIO | Target | Target met? |",
             "|---|---|---:|---:|---:|---:|---:|---|---|"]
    for row in merged:
        peers = dict(row["peers"])
        others = [name for name in peers if name not in PEERS]
        python = peers.get("python", {}).get("text", "")
        python_ratio = row["ratios"].get("python", {}).get("text", "")
        for name in others:  # an anchor (Redis) shares the first peer column, named
            python = f"{name.capitalize()} {peers[name]['text']}"
            python_ratio = row["ratios"][name]["text"]
        cells = [row["workload"], row["metric"], row["roomkit"]["text"], python,
                 peers.get("nio", {}).get("text", ""), python_ratio, row["ratios"].get("nio", {}).get("text", ""),
                 row["target"], row["met"]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


SIDES = (("roomkit", "roomkit"), ("python", "peer"), ("nio", "nio"))


def figure(table, label, metric, sides, get, digits=0, suffix="", note=None, target="", met=None, ratios=True):
    """Adds one figure measured on every side of `sides` (results keyed
    roomkit / peer / nio). `get(entry)` gives the number, or a dict side ->
    getter when the sides report it differently; `note(entry)` text after
    it; `met(value, entry)` the verdict from RoomKit's value."""
    values, cells = {}, {}
    for name, key in SIDES:
        entry = sides.get(key)
        getter = get.get(name) if isinstance(get, dict) else get
        value = None
        if entry and getter:
            try:
                value = getter(entry)
            except (KeyError, TypeError, ZeroDivisionError, IndexError):
                value = None
        values[name] = value
        if value is None:
            cells[name] = Fig("n/a")
        else:
            cells[name] = Fig(f"{number(value, digits)}{suffix}{note(entry) if note else ''}", value, digits)
    ours = values["roomkit"]
    verdict_text = met(ours, sides.get("roomkit")) if met and ours is not None else ""
    table.add(label, metric, cells["roomkit"], cells["python"],
              ratio(ours, values["python"]) if ratios else "", target, verdict_text,
              nio=cells["nio"], nio_ratio=ratio(ours, values["nio"]) if ratios else "")


def median(values):
    values = sorted(values)
    return values[(len(values) - 1) // 2] if values else None


def roomd_rows(table, results):
    roomd = results.get("roomd") or {}
    runs = roomd.get("appends")
    if runs:
        label = "0. roomd alone: durable appends"
        figure(table, label, "appends/s, ~100-byte magix, 2 senders x 5,000 in flight", {"roomkit": runs},
               lambda runs: median(run["appends_per_s"] for run in runs), target=">= 100,000",
               met=lambda a, _: verdict(a >= 100_000), ratios=False)
        figure(table, label, "roomd CPU per append (us, all threads)", {"roomkit": runs},
               lambda runs: median(run["roomd_cpu_us_per_append"] for run in runs), digits=1, ratios=False)
    sides = roomd.get("service_logins") or {}
    if "ready" in sides:  # a results.json from before the peer was measured here
        sides = {"roomkit": sides}
    logins = sides.get("roomkit")
    if not logins:
        return
    ready = logins["ready"]
    size = ready["sessions"] + ready["failed"]
    label = f"0. roomd alone: one bot, {size:,} rooms, one service connection, default roomd"
    figure(table, label, "room logins per second (end to end)", sides, lambda e: e["ready"]["logins_per_s"],
           target=">= 20,000", met=lambda a, _: verdict(a >= 20_000))
    figure(table, label, "s until every room is LOGINED (failed)", sides, lambda e: e["ready"]["login_s"], digits=2,
           note=lambda e: f" ({e['ready']['failed']})", target="<= 10 s",
           met=lambda a, e: verdict(a <= 10 and e["ready"]["failed"] == 0))
    figure(table, label, "s from kill -9 until every room is RECONNECTED (heartbeat timeout 90 s; reconnected)", sides,
           lambda e: e["all_reconnected_s"], digits=2, note=lambda e: f" ({e['recovered']['reconnected']:,})",
           target="<= 45 s",
           met=lambda a, e: verdict(a <= 45 and e["recovered"]["reconnected"] >= e["ready"]["sessions"]))
    figure(table, label, "roomd RSS per session, attached (VmRSS delta / N; same roomd binary for each)", sides,
           lambda e: (e["roomd_rss"] - e["roomd_rss_before"]) / max(1, e["ready"]["sessions"]), suffix=" B",
           ratios=False)


def roombot_rows(table, results):
    """The product (roombot) at scale, and workload 9 (one million rooms)."""
    for label, entry in ((None, (results.get("roomd") or {}).get("roombot")), ("9", results.get("million"))):
        if not entry or "rooms" not in entry:
            continue
        rooms = entry["rooms"]
        if label:
            label = f"9. One million rooms: one roombot, one roomd, {rooms:,} rooms over its service connection"
        else:
            label = f"0. roomd alone: roombot itself (bot.json, serviceToken), {rooms:,} rooms, default roomd"
        sides = {"roomkit": entry}
        figure(table, label, "s until every room is LOGINED (failed login attempts)", sides,
               lambda e: e.get("logined_s"), digits=1, note=lambda e: f" ({e.get('login_failed', 0):,})",
               target="<= 60 s", ratios=False,
               met=lambda a, e: verdict(e.get("logined_s") is not None and a <= 60 and e.get("login_failed", 1) == 0))
        figure(table, label, "s from roomd kill -9 until every room is back (failed login attempts)", sides,
               lambda e: e.get("recovered_s"), digits=1,
               note=lambda e: f" ({e.get('login_failed_after', 0):,})", target="<= 60 s", ratios=False,
               met=lambda a, e: verdict(e.get("recovered_s") is not None and a <= 60))
        budget = 1024 if label.startswith("9.") else 2048
        # Below 100,000 rooms the process's own ~55 MB dominates VmRSS / N: no verdict (quick run).
        figure(table, label, "roombot RSS per room, all in (VmRSS / N)", sides, lambda e: e["rss_per_room_b"], suffix=" B",
               target=f"<= {budget:,} B", ratios=False,
               met=lambda a, e: verdict(a <= budget) if e["rooms"] >= 100_000 else "n/a (too few rooms)")
        if "roomd_rss_per_session_b" in entry:
            roomd_budget = 1536 if label.startswith("9.") else None
            figure(table, label, "roomd RSS per session, all in (VmRSS growth since its start / N)", sides,
                   lambda e: e["roomd_rss_per_session_b"], suffix=" B",
                   target=f"<= {roomd_budget:,} B" if roomd_budget else "", ratios=False,
                   met=(lambda a, e: verdict(a <= roomd_budget)) if roomd_budget else None)
        if "resumed_s" in entry:
            figure(table, label, "s from roombot kill -9 until every room is resumed (failed login attempts)", sides,
                   lambda e: e.get("resumed_s"), digits=1,
                   note=lambda e: f" ({e.get('login_failed_resume', 0):,})", target="<= 60 s", ratios=False,
                   met=lambda a, e: verdict(e.get("resumed_s") is not None and a <= 60))
        figure(table, label, "roombot CPU s to log every room in (all threads)", sides, lambda e: e.get("bot_cpu_s", 0),
               digits=1, ratios=False)
        figure(table, label, "roombot log lines while joining (warnings and progress)", sides, lambda e: e.get("log_lines", 0),
               ratios=False)


def firehose_rows(table, results):
    fire = results.get("firehose") or {}
    if not fire.get("roomkit"):
        return
    label = "6. Client engine alone: firehose source, 100 rooms, 3 plugins"
    figure(table, label, "events/s through the 3rd plugin", fire,
           lambda entries: median(e["report"]["events_per_s"] for e in entries))
    figure(table, label, "client CPU per event (us, all threads)", fire,
           lambda entries: median(e["cpu_us_per_event"] for e in entries), digits=2, target="<= 1 us, <= 0.1x Python",
           met=lambda a, _: both(a <= 1, a / median(e["cpu_us_per_event"] for e in fire["peer"]) <= 0.1
                                 if fire.get("peer") else False))
    bare = fire.get("roomkit_bare")
    if bare:
        def per_hook(entries):
            # Pairs each run's 3-plugin figure with the same run's bare one.
            return (median(e["cpu_us_per_event"] for e in entries) - median(e["cpu_us_per_event"] for e in bare)) / 3 * 1000
        figure(table, label, "client CPU per event with no plugin (us; events counted by an observer)",
               {"roomkit": bare}, lambda entries: median(e["cpu_us_per_event"] for e in entries), digits=2)
        figure(table, label, "amortised cost of one inline hook call under load (ns; (CPU per event with 3 plugins "
               "- with none) / 3: payload, dispatch, the no-op call)", {"roomkit": fire["roomkit"]}, per_hook,
               digits=0, target="<= 100 ns", met=lambda a, _: verdict(a <= 100))


def sessions_rows(table, results, limits):
    sizes = sorted(results["sessions"], key=int)
    for size in sizes:
        sides = results["sessions"][size]
        last = size == sizes[-1]
        label = f"1. Idle sessions, {int(size):,}"
        python = sides.get("peer") or {}
        figure(table, label, "sessions logged in (failed)", sides, lambda e: e["sessions"],
               note=lambda e: f" ({e['failed']})", target=">= 100,000" if last else "",
               met=(lambda a, _: verdict(a >= 100_000)) if last else None)
        figure(table, label, "RSS per session (VmRSS delta / N)", sides, lambda e: e["bytes_per_session"], suffix=" B",
               target="<= 2 KiB, <= 0.2x Python" if last else "",
               met=(lambda a, _: both(a <= 2048, bool(python.get("bytes_per_session"))
                                      and a / python["bytes_per_session"] <= 0.2)) if last else None)
        figure(table, label, "RSS per session after malloc_trim", sides, lambda e: e["bytes_per_session_trimmed"],
               suffix=" B")
        figure(table, label, "room logins per second", sides, lambda e: e["logins_per_s"],
               target=">= 20,000, >= 5x Python" if last else "",
               met=(lambda a, _: both(a >= 20_000, bool(python.get("logins_per_s"))
                                      and a / python["logins_per_s"] >= 5)) if last else None)
        figure(table, label, "client CPU per login (us, all threads)", sides,
               lambda e: e["cpu_ns"] / max(1, e["sessions"]) / 1000, digits=1)
        for key, what in (("roomd_rss", "attached"), ("roomd_rss_retained", "retained idle (client gone)")):
            figure(table, label, f"roomd RSS per session, {what} (VmRSS delta / N; same roomd binary for each)",
                   sides, lambda e, key=key: (e[key] - e["roomd_rss_before"]) / max(1, e["sessions"]), suffix=" B",
                   ratios=False)
        if last and sides.get("roomkit"):
            limits.append(f"Logins at {int(size):,} sessions: {number(sides['roomkit'].get('logins_per_s'))}/s for "
                          f"RoomKit, {number(python.get('logins_per_s'))}/s for the Python peer, against the same roomd.")


def throughput_rows(table, results):
    sides = results["throughput"]
    if not sides.get("roomkit"):
        return
    label = "2. Event throughput, 3 plugins"
    python = sides.get("peer") or {}
    figure(table, label, "events/s at saturation (through the 3rd plugin)", sides,
           lambda e: e["saturated"]["events_per_s"], target=">= 300,000, >= 5x Python",
           met=lambda a, _: both(a >= 300_000, bool(python) and a / python["saturated"]["events_per_s"] >= 5))
    figure(table, label, "client CPU per event at saturation (us, all threads)", sides,
           lambda e: e["saturated"]["cpu_ns"] / max(1, e["saturated"]["events"]) / 1000, digits=1)
    figure(table, label, "roomd appends/s while saturated (x4 deliveries)", sides,
           lambda e: e["sender"]["events_per_s"], ratios=False)
    for key, name in (("p50_us", "p50"), ("p99_us", "p99"), ("p999_us", "p99.9")):
        figure(table, label, f"{name} dispatch latency at half load (us)", sides,
               lambda e, key=key: e["latency"]["latency"][key], digits=1,
               target="<= 2 ms" if key == "p99_us" else "",
               met=(lambda a, _: verdict(a <= 2000)) if key == "p99_us" else None)
    figure(table, label, "half load offered (events/s at the client)", sides, lambda e: e["half_load"], ratios=False)
    if sides["roomkit"].get("latency_bare"):
        for key, name in (("p50_us", "p50"), ("p99_us", "p99"), ("p999_us", "p99.9")):
            figure(table, label, f"{name} latency at half load at the engine, no plugin (us; an observer on the loop "
                   "thread stamps it: sender, roomd and the engine without the plugin hop)", {"roomkit": sides["roomkit"]},
                   lambda e, key=key: e["latency_bare"]["latency"][key], digits=1, ratios=False)


def recovery_rows(table, results):
    sides = results["recovery"]
    ours = sides.get("roomkit")
    if not ours:
        return
    size = ours["ready"]["sessions"]
    label = f"3. Recovery, kill -9, {size:,} sessions"
    figure(table, label, "sessions RECONNECTED", sides, lambda e: e["recovered"]["reconnected"], target="all",
           met=lambda a, _: verdict(a >= size), ratios=False)
    figure(table, label, "s from kill -9 until every session is RECONNECTED", sides, lambda e: e["all_reconnected_s"],
           digits=2, target="<= 5 s", met=lambda a, _: verdict(a <= 5))
    figure(table, label, "s from roomd listening again until all RECONNECTED", sides,
           lambda e: e["after_listening_s"], digits=2, ratios=False)
    figure(table, label, "resumes per second (while resuming: 10 ms slices with a RECONNECTED)", sides,
           lambda e: e["resume_per_s"])
    figure(table, label, "s from first to last RECONNECTED (backoff jitter spreads it)", sides,
           lambda e: e["resume_span_s"], digits=2, ratios=False)
    figure(table, label, "resume rate / steady login rate (%)", sides, lambda e: e["resume_vs_login"] * 100,
           suffix="%", target=">= 80%", met=lambda a, _: verdict(a >= 80), ratios=False)


def fanout_rows(table, results):
    for members in sorted(results["fanout"], key=int):
        sides = results["fanout"][members]
        if not sides.get("roomkit"):
            continue
        label = f"4. roomd fan-out, rooms of {int(members):,}"
        figure(table, label, "deliveries/s received by the members (members = connections)", sides,
               lambda e: e["delivered"]["events_per_s"], target=">= 300,000", met=lambda a, _: verdict(a >= 300_000))
        raw = sides.get("raw")
        if raw:
            rate = raw["delivered"]["events_per_s"]
            figure(table, label, "deliveries/s to raw members (RoomKitLoop sinks: frames counted, not parsed)", {"roomkit": raw},
                   lambda e: e["delivered"]["events_per_s"], ratios=False)
            per = (raw["roomd_cpu_s"] / raw["delivered"]["events"] * 1e6
                   if raw.get("roomd_cpu_s") and raw["delivered"].get("events") else None)
            if per:
                figure(table, label, "roomd CPU per delivery to raw members (us, all threads; its capacity on one "
                       "core = 1e6 / this)", {"roomkit": raw}, lambda _: per, digits=2,
                       target="<= 1 us (1,000,000/s)", met=lambda a, _: verdict(a <= 1), ratios=False)
            redis = sides.get("redis")
            if redis:
                anchor_rows(table, label, rate, per, redis, raw)
        batched = sides.get("raw-batched")
        if batched:
            figure(table, label, "deliveries/s to raw members asking for batched messages (pushes counted, not parsed)",
                   {"roomkit": batched}, lambda e: e["delivered"]["events_per_s"], ratios=False)
            per = (batched["roomd_cpu_s"] / batched["delivered"]["events"] * 1e6
                   if batched.get("roomd_cpu_s") and batched["delivered"].get("events") else None)
            redis = sides.get("redis")
            if per:
                anchor = redis["cpu_us_per_delivery"] if redis else None
                target = f"<= {2 * anchor:.2f} us (2x Redis)" if anchor else ""
                figure(table, label, "roomd CPU per delivery to raw members asking for batched messages (us, all "
                       "threads)", {"roomkit": batched}, lambda _: per, digits=2, target=target,
                       met=(lambda a, _: verdict(a <= 2 * anchor)) if anchor else None, ratios=False)
        figure(table, label, "receiving client CPU per delivery (us)", sides,
               lambda e: e["delivered"]["cpu_ns"] / max(1, e["delivered"]["events"]) / 1000, digits=1)
        figure(table, label, "roomd events/s (appends)", sides, lambda e: e["sender"]["events_per_s"], ratios=False)
        figure(table, label, "connections held by roomd (sessions)", sides, lambda e: e["connections_held"],
               note=lambda e: f" ({e['ready']['sessions']:,})", ratios=False)


def anchor_rows(table, label, rate, per, redis, raw):
    """roomd's fan-out to raw members next to redis-server's PUBLISH to the
    same number of subscribers; the receivers are the same program
    (`roomkit-bench sink` / `redis-sink`) when the anchor has `receiver`."""
    receiver = redis.get("receiver", "redis-cli")
    subscribers = f"{redis['subscribed_after']} {receiver} subscribers, {redis['payload_bytes']}-byte payload"
    deliveries = redis["deliveries_per_s"]
    table.add(label, f"anchor: deliveries/s, roomd to raw members / redis-server PUBLISH to {subscribers}",
              number(rate), number(deliveries), ratio(rate, deliveries), ">= 0.5x", verdict(rate / deliveries >= 0.5),
              peer_name="redis")
    if per:
        anchor = redis["cpu_us_per_delivery"]
        table.add(label, "anchor: server CPU per delivery (us), roomd / Redis; ratio = Redis / roomd (rate per core)",
                  number(per, 2), number(anchor, 2), Fig(f"{anchor / per:.2f}x", anchor / per, 2), "", "",
                  peer_name="redis")
    sink = redis.get("sink_cpu_us_per_delivery")
    if sink and raw["delivered"].get("cpu_ns") and raw["delivered"].get("events"):
        ours = raw["delivered"]["cpu_ns"] / raw["delivered"]["events"] / 1000
        table.add(label, "anchor: receiving sink CPU per delivery (us), roomd's raw sink / redis-sink (1e6 / this = "
                  "the most one sink core can take)", number(ours, 2), number(sink, 2), ratio(ours, sink), "", "",
                  peer_name="redis")


def plugin_rows(table, results):
    plugins = results["plugins"]
    if not plugins.get("roomkit"):
        return
    label = "5. Plugin overhead"
    figure(table, label, "ns per hook call, C ABI (descriptor function pointer; peers: a handler call)", plugins,
           {"roomkit": lambda e: e["c_abi_ns"], "python": lambda e: e["call_ns"], "nio": lambda e: e["call_ns"]}, digits=1, target="<= 50 ns",
           met=lambda a, _: verdict(a <= 50))
    figure(table, label, "ns per hook call, Swift SDK (75-byte payload; peers: decode it (json.loads, JSONDecoder) + call)", plugins,
           {"roomkit": lambda e: e["swift_sdk_ns"], "python": lambda e: e["decode_call_ns"],
            "nio": lambda e: e["decode_call_ns"]}, digits=1,
           target="<= 50 ns", met=lambda a, _: verdict(a <= 50))
    figure(table, label, "ns per hook call, Swift SDK, payload `{}`", plugins,
           {"roomkit": lambda e: e["swift_sdk_empty_payload_ns"]}, digits=1, ratios=False)
    figure(table, label, "ns per hook call through PluginManager, C plugin: wall (/ CPU) (peers: loop over 3 handlers)",
           plugins, {"roomkit": lambda e: e["manager_c_wall_ns"], "python": lambda e: e["dispatch_ns"],
                     "nio": lambda e: e["dispatch_ns"]}, digits=1,
           note=lambda e: f" / {number(e['manager_c_cpu_ns'])}" if "manager_c_cpu_ns" in e else "")
    figure(table, label, "ns per hook call through PluginManager, Swift SDK plugin: wall (/ CPU)", plugins,
           {"roomkit": lambda e: e["manager_swift_wall_ns"]},
           note=lambda e: f" / {number(e['manager_swift_cpu_ns'])}", ratios=False)


def bot_restart_rows(table, results):
    ours = results.get("botrestart", {}).get("roomkit")
    if not ours:
        return
    label = f"8. Bot restart, roombot kill -9, {ours['rooms']:,} rooms"
    only = {"roomkit": ours}
    figure(table, label, "s from process start until every room is resumed (LOGINED)", only,
           lambda e: e["all_resumed_s"], digits=1, ratios=False)
    figure(table, label, "s for the first start (fresh logins), for comparison", only, lambda e: e["first_start_s"],
           digits=1, ratios=False)
    figure(table, label, "resumes answered recovered:true (resync events)", only, lambda e: e["recovered"],
           note=lambda e: f" ({e['resync']:,})", target="all", met=lambda a, e: verdict(a >= e["rooms"]), ratios=False)
    figure(table, label, f"resumes invisible to the other members (heartbeat timeout {ours['heartbeat_timeout_s']} s; %)",
           only, lambda e: e["invisible_fraction"] * 100, digits=1, suffix="%", target=">= 99%",
           met=lambda a, _: verdict(a >= 99), ratios=False)
    short = results["botrestart"].get("roomkit_short")
    if short:
        figure(table, label, f"same with a heartbeat timeout of {short['heartbeat_timeout_s']} s: "
               "invisible (%), recovered", {"roomkit": short}, lambda e: e["invisible_fraction"] * 100, digits=1,
               suffix="%", note=lambda e: f", {e['recovered']:,}", ratios=False)


def isolation_rows(table, results):
    iso = results.get("isolation")
    if not iso:
        return
    label = "7. Plugin isolation (process vs inline; the inline figure in the first peer column)"
    for count in (1, 3):
        p, i = iso[f"process_{count}"], iso[f"inline_{count}"]
        target = ">= 0.8x inline" if count == 1 else ""
        table.add(label, f"events/s to {count} plugin(s), no-op C (process / inline)", number(p["events_per_s"]),
                  number(i["events_per_s"]), ratio(p["events_per_s"], i["events_per_s"]), target,
                  verdict(p["events_per_s"] >= 0.8 * i["events_per_s"]) if count == 1 else "", peer_name="inline")
        table.add(label, f"ns per hook, {count} plugin(s): wall / bot CPU / plugin CPU (process / inline)",
                  Fig(f"{number(p['wall_ns_per_hook'])} / {number(p['bot_cpu_ns_per_hook'])} / "
                      f"{number(p['plugin_cpu_ns_per_hook'])}", p["wall_ns_per_hook"]),
                  Fig(f"{number(i['wall_ns_per_hook'])} / {number(i['bot_cpu_ns_per_hook'])}", i["wall_ns_per_hook"]),
                  "", "", "", peer_name="inline")
    for count in (1, 3):
        p = iso[f"process_{count}"]
        if "bot_cpu_ns_per_event_per_plugin" not in p:
            continue
        table.add(label, f"bot CPU per event per process plugin, {count} plugin(s) (ns: bot CPU with the "
                  "process plugins minus with none, / events / plugins)", number(p["bot_cpu_ns_per_event_per_plugin"]),
                  "", "", "<= 1,000 ns" if count == 1 else "",
                  verdict(p["bot_cpu_ns_per_event_per_plugin"] <= 1_000) if count == 1 else "", peer_name="inline")
    p, i = iso["process_url"], iso["inline_url"]
    table.add(label, "urlInterrupter round trip p50 (us, process / inline)", number(p["p50_us"], 1),
              number(i["p50_us"], 1), ratio(p["p50_us"], i["p50_us"]), "", "", peer_name="inline")
    table.add(label, "urlInterrupter round trip p99 (us, process / inline)", number(p["p99_us"], 1),
              number(i["p99_us"], 1), ratio(p["p99_us"], i["p99_us"]), "<= 100 us", verdict(p["p99_us"] <= 100),
              peer_name="inline")
    floor = iso.get("socket_floor")
    if floor:
        table.add(label, "the machine's floor: one byte echoed by /bin/cat over a socket pair, p50 / p99 (us; "
                  "two sleeping processes, no RoomKit code)", Fig(f"{number(floor['p50_us'], 1)} / "
                  f"{number(floor['p99_us'], 1)}", floor["p50_us"]), "", "", "", "", peer_name="inline")


def python_plugin_rows(table, results):
    """Workload 9 (python_plugin_workload.py): the SDK's no-op plugin over the wire."""
    py = results.get("pythonplugin")
    if not py:
        return
    label = f"10. No-op python plugin over the wire (roomkit_plugin, batches of {py['batch']:,})"
    only = {"roomkit": py}
    figure(table, label, "events/s, socket to handler and back (DONE)", only, lambda e: e["events_per_s"],
           target=">= 100,000", met=lambda a, _: verdict(a >= 100_000), ratios=False)
    figure(table, label, "plugin-process CPU per event (ns)", only, lambda e: e["plugin_cpu_ns_per_event"], ratios=False)
    figure(table, label, "events/s with one event per frame (ns of plugin CPU per event after it)", only,
           lambda e: e["single_events_per_s"], note=lambda e: f" ({e['single_plugin_cpu_ns_per_event']:,})", ratios=False)
    figure(table, label, "urlInterrupter round trip to an idle python plugin, p50 / p99 (us)", only,
           lambda e: e["url_p50_us"], digits=1, note=lambda e: f" / {e['url_p99_us']:,.1f}", ratios=False)


def unit(metric, text):
    """The unit of a figure, read off its metric and value text."""
    if text.endswith(" B") or " B (" in text or "RSS" in metric:
        return "bytes"
    if "%" in metric or text.endswith("%"):
        return "percent"
    for marker, name in (("(us", "us"), ("(ns", "ns"), ("per second", "1/s"), ("/s", "1/s"), ("ns per", "ns"),
                         ("s from", "s"), ("s until", "s"), ("s for", "s")):
        if marker in metric:
            return name
    return "count"


def runs_of(results):
    """The per-run results (a results.json from before BENCH_RUNS is one run)."""
    return results.get("runs") or [results]


def build(results):
    """Every run's table, merged into one row per figure; and the limits
    paragraph of the first run."""
    tables, limits = [], []
    for index, run in enumerate(runs_of(results)):
        table = Table()
        collected = []
        roomd_rows(table, run)
        roombot_rows(table, run)
        sessions_rows(table, run, collected)
        throughput_rows(table, run)
        recovery_rows(table, run)
        fanout_rows(table, run)
        plugin_rows(table, run)
        firehose_rows(table, run)
        isolation_rows(table, run)
        bot_restart_rows(table, run)
        python_plugin_rows(table, run)
        tables.append(table)
        if index == 0:
            limits = collected
    return merge(tables), limits


def figures(results):
    """Every figure as data, for Benchmarks/.build/results.json: workload,
    metric, unit, RoomKit's and each peer's value (median, min, max, each
    run's), the ratios RoomKit / peer (per run, then their median and
    spread), the target and its verdict."""
    merged, _ = build(results)
    out = []
    for row in merged:
        out.append({"workload": row["workload"], "metric": row["metric"],
                    "unit": unit(row["metric"], row["roomkit"]["text"]), "runs": row["runs"],
                    "roomkit": row["roomkit"], "peers": row["peers"], "ratios": row["ratios"],
                    "target": row["target"], "met": row["met"].replace("**", "")})
    return out


def render(results, command):
    machine = results["machine"]
    merged, limits = build(results)
    runs = len(runs_of(results))
    million_runs = sum(1 for run in runs_of(results) if run.get("million"))
    # What else ran on the machine (results.json "shared" says it for a run that knows).
    shared = results.get("shared") or "yes: other engineers' builds and tests ran on the same 2 cores during the run"
    quick = " (BENCH_QUICK smoke run: smaller sizes, not the real figures)" if results["quick"] else ""
    nio = machine.get("nio") or "not built"
    pinning = results.get("pinning") or "none"
    from notes import NOTES, METHOD
    return f"""# Benchmarks

RoomKit next to what a user would pick instead, speaking the same protocol
to the same release-built `roomd`, in the same run: a Python asyncio bot on
the `websockets` library (`Benchmarks/peers/roomkit_peer.py`), and a Swift
client on SwiftNIO and Vapor's websocket-kit (`Benchmarks/peers/nio-peer`).
Absolute times on a shared machine drift; read the ratios.

Written by `{command}`{quick}; do not edit by hand.

## Machine and run

| | |
|---|---|
| Date | {machine['date']} |
| Command | `{command}` (took {results.get('elapsed_s', 0):.0f} s, builds not counted) |
| Runs | {runs}: every workload runs once per run, the runs one after another; each figure is the median run, (min-max) when the runs differ; workload 9 (one million rooms, up to 15 minutes) runs in the first {million_runs} only (BENCH_MILLION_RUNS) |
| Pinning | {pinning} |
| Machine | {machine['nproc']} cores, {machine['cpu']}, {machine['ram_gib']:.1f} GiB RAM, Linux {machine['kernel']} |
| Shared | {shared} |
| RoomKit | revision {machine['revision']}, {machine['swift']}, release build |
| Python peer | Python {machine['python']}, websockets {machine['websockets']}, default asyncio event loop, stdlib json |
| NIO peer | {nio} |

## Results

Ratios are RoomKit / peer, taken in each run from that run's figures
(median of the runs' ratios, min-max): above 1x is better for rates, below
1x is better for memory, CPU, latency and times. "n/a": the side does not
take part in that figure.

{render_table(merged)}

{TARGETS}

{METHOD}

## What limits us / what is left

{NOTES}
"""
