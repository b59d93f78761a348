#!/usr/bin/env python3
"""A fleet run at scale (docs/FLEET.md; `make fleet-sim`, not part of the tests).

Starts a private redis-server (SLOWLOG on every command), a roomd and
FLEET_HOSTS roombot processes sharing FLEET_ROOMS rooms, then:
  1. cold start: time until every room has exactly one bot;
  2. kill -9 of FLEET_KILL hosts: time until every room again has exactly one
     bot among the survivors, the most rooms ever held twice, and how many
     moved rooms were taken over by resuming the dead host's session;
  3. the measured cost of each Lua script (SLOWLOG, microseconds per call).
Prints one JSON object. Needs the debug (or FLEET_BUILD=release) binaries.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HOSTS = int(os.environ.get("FLEET_HOSTS", "10"))
ROOMS = int(os.environ.get("FLEET_ROOMS", "20000"))
KILL = int(os.environ.get("FLEET_KILL", "2"))
TTL = float(os.environ.get("FLEET_TTL", "2"))
BIN = os.environ.get("FLEET_BIN", os.path.join(os.path.dirname(__file__), "..", ".build",
                                               os.environ.get("FLEET_BUILD", "debug")))
SECRET = "fleet-sim-secret-0123456789"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(port, *args):
    out = subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True)
    return out.stdout


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as answer:
        return answer.read().decode()


def holders(bots):
    result = {}
    for index, (process, control) in enumerate(bots):
        if process.poll() is not None:
            continue
        try:
            rooms = json.loads(get(control, "/v1/rooms"))
        except Exception:
            continue
        for room in rooms:
            if room["reason"] in ("LOGINED", "RECONNECTED"):
                result.setdefault(room["room"], []).append(index)
    return result


def wait_once(bots, rooms, timeout):
    started = time.monotonic()
    doubled = 0
    while time.monotonic() - started < timeout:
        picture = holders(bots)
        doubled = max(doubled, sum(1 for v in picture.values() if len(v) > 1))
        if len(picture) == len(rooms) and all(len(v) == 1 for v in picture.values()):
            return time.monotonic() - started, doubled, picture
        time.sleep(0.5)
    raise RuntimeError(f"not every room homed once within {timeout} s: {len(picture)} held")


def metric(control, name):
    for line in get(control, "/metrics").splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


def script_costs(port):
    """Microseconds per call of each fleet script, from SLOWLOG (every command logged)."""
    entries = json.loads(cli(port, "--json", "SLOWLOG", "GET", "1000000") or "[]")
    costs = {}
    for entry in entries:
        micro, args = entry[2], entry[3]
        if not args or str(args[0]).upper() != "EVALSHA" or len(args) < 4:
            continue
        keys = int(args[2])
        first = str(args[3]).rsplit(":", 1)[-1]
        name = {6: "renew", 5: "claim", 4: "status"}.get(keys) or {
            "lease": "release", "owner": "cursors", "changes": "rooms", "fence": "refence"}.get(first, "other")
        cost = costs.setdefault(name, {"calls": 0, "us": 0, "max_us": 0, "items": 0})
        cost["calls"] += 1
        # What the script iterates over: rooms (cursors, rooms: one key each)
        # or shard pairs (renew, release: the arguments after the fixed ones).
        if name in ("cursors", "rooms"):
            cost["items"] += keys - 1
        elif name == "renew":
            # ARGV: 5 fixed, then shard/fence pairs; SLOWLOG keeps 32 arguments
            # and ends with "... (N more arguments)".
            shown, more = len(args), 0
            if "more arguments" in str(args[-1]):
                shown -= 1
                more = int(str(args[-1]).split("(")[1].split()[0])
            cost["items"] += max(0, shown + more - 3 - keys - 5) // 2
        cost["us"] += int(micro)
        cost["max_us"] = max(cost["max_us"], int(micro))
    for cost in costs.values():
        cost["us_per_call"] = round(cost["us"] / cost["calls"], 1)
        if cost["items"]:
            cost["us_per_item"] = round(cost["us"] / cost["items"], 2)
    return costs


def main():
    work = tempfile.mkdtemp(prefix="fleet-sim-")
    redis_port, roomd_port = free_port(), free_port()
    procs = []
    try:
        procs.append(subprocess.Popen(
            ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", work, "--slowlog-log-slower-than", "0", "--slowlog-max-len", "1000000"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen(
            [os.path.join(BIN, "roomd"), "serve", "--listen", f"127.0.0.1:{roomd_port}", "--secret", SECRET,
             "--data", os.path.join(work, "data"), "--log-level", "warning"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "roomd.log"), "w")))
        time.sleep(1)
        rooms = [f"r{i}" for i in range(ROOMS)]
        bots = []
        for index in range(HOSTS):
            control = free_port()
            config = {"server": f"ws://127.0.0.1:{roomd_port}/v1/rooms", "user": {"id": "fleetbot"},
                      "auth": {"secret": SECRET}, "rooms": rooms if index == 0 else [],
                      "control": f"127.0.0.1:{control}", "events": os.path.join(work, f"events{index}.ndjson"),
                      "state": os.path.join(work, f"state{index}.sqlite"), "loginTimeout": 120, "reconnectWindow": 120,
                      "fleet": {"redis": f"redis://127.0.0.1:{redis_port}/0", "name": "sim", "leaseTTL": TTL,
                                "loadThreshold": 1.0}}
            path = os.path.join(work, f"bot{index}.json")
            with open(path, "w") as file:
                json.dump(config, file)
            process = subprocess.Popen([os.path.join(BIN, "roombot"), "run", "--config", path, "--log-level", "warning"],
                                       stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, f"bot{index}.log"), "w"))
            bots.append((process, control))
            procs.append(process)
        cold, cold_doubled, picture = wait_once(bots, rooms, 600)
        per_host = sorted(sum(1 for v in picture.values() if v[0] == i) for i in range(HOSTS))
        time.sleep(2 * TTL)  # every cursor written
        victims = list(range(1, 1 + KILL))
        moved = sum(1 for v in picture.values() if v[0] in victims)
        killed = time.monotonic()
        for index in victims:
            bots[index][0].send_signal(signal.SIGKILL)
            bots[index][0].wait()
        rehome, doubled, _ = wait_once(bots, rooms, 600)
        rehome = time.monotonic() - killed
        resumes = sum(metric(control, "roombot_fleet_handover_resumes_total")
                      for i, (process, control) in enumerate(bots) if i not in victims)
        survivors = HOSTS - KILL
        result = {
            "hosts": HOSTS, "rooms": ROOMS, "ttl_s": TTL, "cold_start_s": round(cold, 1),
            "rooms_per_host": [per_host[0], per_host[-1]], "killed": KILL, "moved_rooms": moved,
            "rehome_s": round(rehome, 1),
            "bound_s": round(TTL + 1.25 + moved / (survivors * 190), 1),
            "handover_resumes": int(resumes), "max_rooms_held_twice": max(doubled, cold_doubled),
            "scripts": script_costs(redis_port),
        }
        print(json.dumps(result, indent=2))
    finally:
        for process in reversed(procs):
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait()
        if not os.environ.get("KEEP_FLEET_DATA"):
            shutil.rmtree(work, ignore_errors=True)
        else:
            print("data in", work, file=sys.stderr)


if __name__ == "__main__":
    main()
