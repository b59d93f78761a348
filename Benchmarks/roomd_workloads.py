"""Workload 0, roomd alone (Benchmarks/bench.py): durable appends per second
with group commit, logins of one bot on one service connection against a
roomd with its default settings, and their resume after `kill -9`.

The appends rows measure roomd and the sender only (no peer value); the
service logins run the RoomKit bot and then the Python peer's, side by side.
"""

import statistics
import time


def appends(results, bench):
    """Durable appends/s of ~100-byte magix events: two `roomkit-bench send`
    processes (5,000 requests in flight each, 100 rooms each) flood a fresh
    roomd (raised request limits, everything else default: synchronous=NORMAL,
    WAL); every event is committed before its reply. One run (bench.py
    repeats the whole set BENCH_RUNS times)."""
    runs = []
    duration = 3 if bench.QUICK else 5
    for run in range(1):
        roomd = bench.Roomd("appends", pin=False)  # roomd alone, no side to be fair to: not pinned
        cpu_before = roomd.cpu_seconds()
        import concurrent.futures
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            senders = list(pool.map(lambda index: bench.send(roomd, 100, duration, window=5000, prefix=f"a{index}",
                                                               cpu=None),
                                    range(2)))
        cpu = roomd.cpu_seconds() - cpu_before
        roomd.stop()
        acked = sum(sender["acked"] for sender in senders)
        rate = sum(sender["events_per_s"] for sender in senders)
        runs.append({"appends_per_s": rate, "acked": acked, "roomd_cpu_s": cpu,
                     "roomd_cpu_us_per_append": cpu / max(1, acked) * 1e6, "senders": senders})
        bench.log(f"appends run {run + 1}: {rate:.0f}/s, roomd {cpu / max(1, acked) * 1e6:.1f} us CPU per append")
    results["roomd"]["appends"] = runs


def service_logins(results, bench):
    """One bot (RoomKit, then the peer), one connection with a `service`
    token, N rooms, against roomd with its DEFAULT settings (no raised
    limits); then kill -9, restart on the same data, and time until every
    session is RECONNECTED."""
    for side in bench.SIDES:
        service_logins_side(results, bench, side)


def service_logins_side(results, bench, side):
    size = 20_000 if bench.QUICK else 100_000
    roomd = bench.Roomd("service-logins", defaults=True)
    before = roomd.rss()
    client = bench.Client(side, "service-logins", roomd, connections=1, rooms=size, service=1, window=1_000)
    ready = client.read()
    roomd_rss = roomd.rss()
    killed = time.monotonic_ns()
    roomd.kill9()
    roomd.start()
    listening = time.monotonic_ns()
    recovered = client.ask("await-reconnect")
    client.quit()
    roomd.stop()
    recovered.pop("times", None)
    entry = {"ready": ready, "recovered": recovered, "roomd_rss_before": before, "roomd_rss": roomd_rss,
             "restart_s": (listening - killed) / 1e9,
             "all_reconnected_s": (recovered["last_ns"] - killed) / 1e9 if recovered["last_ns"] else None}
    results["roomd"].setdefault("service_logins", {})[side] = entry
    bench.log(f"service logins {side}: {ready['sessions']}/{size} in {ready['login_s']:.1f} s "
              f"({ready['logins_per_s']:.0f}/s); after kill -9 all {recovered['reconnected']} resumed "
              f"{entry['all_reconnected_s']} s later")


def roombot_logins(results, bench):
    """The product next to the engine's bench client: one release `roombot`
    (bot.json with N rooms and a `serviceToken`) against a roomd with its
    default settings; then roomd kill -9 and restart on the same data, and
    the time until every room is back (Benchmarks/roombot_scale.py)."""
    import roombot_scale
    size = 20_000 if bench.QUICK else 300_000
    entry = roombot_scale.measure(bench.BIN, size, timeout=180, kill_roomd=True)
    entry.pop("log_sample", None)
    results["roomd"]["roombot"] = entry
    bench.log(f"roombot, {size} rooms: all LOGINED {entry.get('logined_s')} s, {entry.get('rss_per_room_b')} B RSS/room, "
              f"{entry.get('login_failed')} failed attempts, {entry.get('log_lines')} log lines; after roomd kill -9 "
              f"all back in {entry.get('recovered_s')} s")


def million_rooms(results, bench):
    """Workload 9 (full run only): one roombot, one roomd, 1,000,000 rooms
    over the bot's service connection: the time until all are LOGINED, RSS
    per session on each side; roomd kill -9, then the time until every room
    is RECONNECTED; roombot kill -9, then the time until every room is
    resumed (LOGINED again)."""
    import roombot_scale
    entry = roombot_scale.measure(bench.BIN, 1_000_000, timeout=300, kill_roomd=True, kill_roombot=True)
    entry.pop("log_sample", None)
    results["million"] = entry
    bench.log(f"one million rooms: all LOGINED {entry.get('logined_s')} s, {entry.get('rss_per_room_b')} B RSS/room in "
              f"the bot, {entry.get('roomd_rss_per_session_b')} B in roomd; after roomd kill -9 all back in "
              f"{entry.get('recovered_s')} s; after roombot kill -9 all resumed in {entry.get('resumed_s')} s")


def roomd_alone(results, bench):
    appends(results, bench)
    service_logins(results, bench)
    roombot_logins(results, bench)


def spread(values):
    """Median and (min-max) of a list of numbers."""
    return statistics.median(values), min(values), max(values)
