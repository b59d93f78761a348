#!/usr/bin/env python3
"""roombot at scale, the product itself (issue #26): one release `roomd` as
shipped (default limits), one release `roombot` with a `serviceToken` and N
rooms in bot.json. Reports, as one JSON object on stdout:

- `logined_s`: seconds from the bot's start until every room is LOGINED;
- `rss_mb`, `rss_per_room_b`: the bot's RSS then (VmRSS, not after any trim),
  and `peak_rss_mb` (VmHWM);
- `bot_cpu_s`, `roomd_cpu_s`: each one's CPU (user+system) until then, and
  `bot_write_calls`, `roomd_write_calls`: their write-type system calls
  (`syscw` of /proc/PID/io: the event log's writes, the sockets', SQLite's),
  a count the load does not move;
- `login_failed`: LOGIN_FAILED lines in the event log (failed attempts);
- `log_lines`: lines the bot wrote on stderr (warnings and above, plus the
  progress lines);
- with `--kill-roomd`: roomd is killed with SIGKILL once all are in, started
  again on the same port and data, and `recovered_s` is the time from the
  restart until every room is RECONNECTED (or LOGINED again) once more;
  `login_failed_after` and `log_lines_after` count what that cost,
  `bot_cpu_after_s` and `roomd_cpu_after_s` the CPU it took (the restarted
  roomd's from its start: its restore and the resumes);
- `roomd_rss_mb`, `roomd_rss_per_session_b`: roomd's RSS with every room in,
  and its growth since roomd started, per session (VmRSS delta / N);
- with `--kill-roombot`: then roombot is killed with SIGKILL (after a second
  of quiet, so its store holds every cursor), started again on the same
  config and store, and `resumed_s` is the time from that start until every
  room is LOGINED (or RECONNECTED) again; `login_failed_resume` and
  `log_lines_resume` count what that cost, `bot_cpu_resume_s` its CPU.

Usage: python3 Benchmarks/roombot_scale.py --rooms 300000 [--kill-roomd]
       [--kill-roombot] [--bin .build/release] [--timeout 120]
Not part of `make test`; `make scale-bot` runs it.
"""
import argparse
import base64
import hashlib
import hmac
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SECRET = "scale-secret"


def jwt(secret, user, role):
    def encode(data):
        return base64.urlsafe_b64encode(data).rstrip(b"=")
    now = int(time.time())
    header = encode(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = encode(json.dumps({"sub": user, "room": "*", "role": role, "exp": now + 86400, "iat": now}).encode())
    signature = encode(hmac.new(secret.encode(), header + b"." + claims, hashlib.sha256).digest())
    return (header + b"." + claims + b"." + signature).decode()


def write_calls(pid):
    """The write-type system calls `pid` made so far (`syscw` in /proc/PID/io),
    a count the machine's load does not move, unlike CPU time."""
    try:
        with open(f"/proc/{pid}/io") as io:
            for line in io:
                if line.startswith("syscw:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def cpu_s(pid):
    """User plus system CPU seconds of `pid` so far (all threads)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def rss_kb(pid, field="VmRSS"):
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class Roomd:
    def __init__(self, binary, work, extra):
        self.binary, self.data, self.extra = binary, os.path.join(work, "roomd-data"), extra
        self.log = open(os.path.join(work, "roomd.log"), "a")
        self.port = 0
        self.process = None
        self.start()

    def start(self):
        self.process = subprocess.Popen(
            [self.binary, "serve", "--listen", f"127.0.0.1:{self.port}", "--secret", SECRET, "--data", self.data,
             "--log-level", "warning", *self.extra], stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.process.stdout.readline()
        if not line.startswith("listening on"):
            raise RuntimeError(f"roomd did not start: {line!r}")
        self.port = int(line.strip().rsplit(":", 1)[1])

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


class EventTail:
    """Counts the event log's roomStateChanged lines by reason and room, incrementally."""

    def __init__(self, path):
        self.path, self.offset, self.rest = path, 0, b""

    def read(self, on_line):
        if not os.path.exists(self.path):
            return
        with open(self.path, "rb") as file:
            file.seek(self.offset)
            data = file.read()
        self.offset += len(data)
        data = self.rest + data
        lines = data.split(b"\n")
        self.rest = lines.pop()
        for line in lines:
            on_line(line)


def count_lines(path, since=0):
    with open(path, "rb") as file:
        file.seek(since)
        return file.read().count(b"\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rooms", type=int, default=300_000)
    parser.add_argument("--bin", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".build", "release"))
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--kill-roomd", action="store_true")
    parser.add_argument("--kill-roombot", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs)")
    parser.add_argument("--roomd-arg", action="append", default=[], help="an extra roomd serve argument")
    parser.add_argument("--wrap", default="", help="a command to run roombot under (e.g. 'perf record -g -o FILE')")
    args = parser.parse_args()
    print(json.dumps(measure(args.bin, args.rooms, timeout=args.timeout, kill_roomd=args.kill_roomd,
                             kill_roombot=args.kill_roombot, keep=args.keep, roomd_args=args.roomd_arg, wrap=args.wrap)))


def measure(bin_dir, rooms, timeout=120, kill_roomd=False, kill_roombot=False, keep=False, roomd_args=(), wrap=""):
    """One run (see the module's doc); returns its figures as a dict."""
    work = tempfile.mkdtemp(prefix="roombot-scale-")
    roomd = Roomd(os.path.join(bin_dir, "roomd"), work, list(roomd_args))
    roomd_rss_start = rss_kb(roomd.process.pid)
    events = os.path.join(work, "events.ndjson")
    config = os.path.join(work, "bot.json")
    with open(config, "w") as file:
        json.dump({"server": f"ws://127.0.0.1:{roomd.port}/v1/rooms", "user": {"id": "bot"},
                   "auth": {"secret": SECRET}, "serviceToken": jwt(SECRET, "bot", "service"),
                   "rooms": [f"r{index}" for index in range(rooms)], "events": events}, file)
    bot_log_path = os.path.join(work, "roombot.log")
    bot_log = open(bot_log_path, "w")
    result = {"rooms": rooms}
    started = time.monotonic()

    def start_bot():
        return subprocess.Popen([*wrap.split(), os.path.join(bin_dir, "roombot"), "run", "--config", config,
                                 "--log-level", "warning"], stdout=subprocess.DEVNULL, stderr=bot_log)

    bot = start_bot()
    tail = EventTail(events)
    state = {"logined": set(), "back": set(), "resumed": set(), "failed": 0, "phase": "logined"}

    def on_line(line):
        if b'"roomStateChanged"' not in line:
            return
        if b'"LOGIN_FAILED"' in line:
            state["failed"] += 1
            return
        if b'"LOGINED"' in line or b'"RECONNECTED"' in line:
            state[state["phase"]].add(json.loads(line)["room"])

    def wait(target, label):
        deadline = time.monotonic() + timeout
        first_rss = None
        while time.monotonic() < deadline:
            if bot.poll() is not None:
                raise RuntimeError(f"roombot exited with {bot.returncode}")
            tail.read(on_line)
            if first_rss is None and state[target]:
                first_rss = rss_kb(bot.pid)
                result[f"first_{target}_s"] = round(time.monotonic() - started, 2)
            if len(state[target]) >= rooms:
                return time.monotonic(), first_rss
            time.sleep(0.25)
        print(f"{label}: only {len(state[target])} of {rooms} within {timeout} s", file=sys.stderr)
        return None, first_rss

    try:
        done, first_rss = wait("logined", "LOGINED")
        result["logined_s"] = round(done - started, 2) if done else None
        result["logined"] = len(state["logined"])
        result["bot_cpu_s"] = round(cpu_s(bot.pid), 2)
        result["roomd_cpu_s"] = round(cpu_s(roomd.process.pid), 2)
        result["bot_write_calls"] = write_calls(bot.pid)
        result["roomd_write_calls"] = write_calls(roomd.process.pid)
        result["load"] = os.getloadavg()[0]
        time.sleep(1)
        rss = rss_kb(bot.pid)
        result["rss_mb"] = round(rss / 1024, 1)
        result["rss_per_room_b"] = round(rss * 1024 / rooms)
        result["rss_before_first_login_mb"] = round((first_rss or 0) / 1024, 1)
        result["peak_rss_mb"] = round(rss_kb(bot.pid, "VmHWM") / 1024, 1)
        roomd_rss = rss_kb(roomd.process.pid)
        result["roomd_rss_mb"] = round(roomd_rss / 1024, 1)
        result["roomd_rss_per_session_b"] = round((roomd_rss - roomd_rss_start) * 1024 / rooms)
        result["login_failed"] = state["failed"]
        bot_log.flush()
        result["log_lines"] = count_lines(bot_log_path)
        if kill_roomd and done:
            log_offset = os.path.getsize(bot_log_path)
            failed_before = state["failed"]
            state["phase"] = "back"
            roomd.kill()
            time.sleep(1)
            restarted = time.monotonic()
            roomd.start()
            back, _ = wait("back", "back after the roomd kill")
            result["recovered_s"] = round(back - restarted, 2) if back else None
            result["back"] = len(state["back"])
            result["bot_cpu_after_s"] = round(cpu_s(bot.pid) - result["bot_cpu_s"], 2)
            result["roomd_cpu_after_s"] = round(cpu_s(roomd.process.pid), 2)
            result["login_failed_after"] = state["failed"] - failed_before
            result["log_lines_after"] = count_lines(bot_log_path, log_offset)
            rss = rss_kb(bot.pid)
            result["rss_after_mb"] = round(rss / 1024, 1)
        if kill_roombot and done and (not kill_roomd or result.get("recovered_s") is not None):
            time.sleep(1)  # quiet: the store holds every session's cursor
            bot.send_signal(signal.SIGKILL)
            bot.wait()
            tail.read(on_line)
            log_offset = os.path.getsize(bot_log_path)
            failed_before = state["failed"]
            state["phase"] = "resumed"
            restarted = time.monotonic()
            bot = start_bot()
            back, _ = wait("resumed", "resumed after the roombot kill")
            result["resumed_s"] = round(back - restarted, 2) if back else None
            result["resumed"] = len(state["resumed"])
            result["bot_cpu_resume_s"] = round(cpu_s(bot.pid), 2)
            result["login_failed_resume"] = state["failed"] - failed_before
            result["log_lines_resume"] = count_lines(bot_log_path, log_offset)
            result["rss_resume_mb"] = round(rss_kb(bot.pid) / 1024, 1)
    finally:
        bot.send_signal(signal.SIGKILL)
        bot.wait()
        roomd.stop()
        bot_log.close()
        with open(bot_log_path, "rb") as file:
            head = file.read().splitlines()
        result["log_sample"] = [line.decode(errors="replace")[:200] for line in head[-8:]]
        if keep:
            result["work"] = work
        else:
            shutil.rmtree(work, ignore_errors=True)
    return result




if __name__ == "__main__":
    main()
