"""A bot's side of the plugin wire, for the SDK's own tests and benchmarks.

It spawns a plugin script with the wire on fd 3 exactly as roombot does
(docs/PLUGIN-WIRE.md §1) and speaks frames to it. Only the frame codec is
here; it checks the child's frames strictly (bounds, exact bodies), so a
child that passes these tests writes what the real bot parses.
"""

import mmap
import os
import select
import socket
import struct
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
SDK = os.path.dirname(HERE)

NULL = 0xFFFFFFFF
LOAD, EVENTS, URL, REPLY, UNLOAD, EXPORT_STATE, IMPORT_STATE, PING = 1, 2, 5, 6, 7, 9, 10, 11
HELLO, LOADED, ANSWER, LOG, CALL, UNLOADED, DONE, PONG, FAILED = 64, 65, 66, 67, 68, 69, 70, 71, 72
NAMES = {HELLO: "HELLO", LOADED: "LOADED", ANSWER: "ANSWER", LOG: "LOG", CALL: "CALL",
         UNLOADED: "UNLOADED", DONE: "DONE", PONG: "PONG", FAILED: "FAILED"}


def s(text: Optional[str]) -> bytes:
    if text is None:
        return struct.pack("<I", NULL)
    data = text.encode("utf-8")
    return struct.pack("<I", len(data)) + data


def frame(kind: int, body: bytes = b"") -> bytes:
    return struct.pack("<IB", len(body) + 1, kind) + body


def record(rtype: int, seq: int, number: int, a: Optional[str], b: Optional[str]) -> bytes:
    return struct.pack("<BQq", rtype, seq, number) + s(a) + s(b)


def events(records: List[bytes]) -> bytes:
    return frame(EVENTS, struct.pack("<I", len(records)) + b"".join(records))


class Parsed:
    """One frame from the child, its fields decoded by type."""

    def __init__(self, kind: int, body: bytes) -> None:
        self.kind = kind
        self.name = NAMES.get(kind, "type %d" % kind)
        self.body = body
        at = 0

        def take(fmt: str):
            nonlocal at
            values = struct.unpack_from(fmt, body, at)
            at += struct.calcsize(fmt)
            return values

        def take_str() -> Optional[str]:
            nonlocal at
            (n,) = take("<I")
            if n == NULL:
                return None
            assert at + n <= len(body), "str past the end of %s" % self.name
            text = body[at:at + n].decode("utf-8")
            at += n
            return text

        if kind == HELLO:
            (self.version, self.flags, self.hooks, self.abi_major, self.abi_minor, self.stage) = take("<IIIHHi")
            self.message = take_str()
        elif kind == LOADED:
            (self.result,) = take("<i")
        elif kind == ANSWER:
            self.request, self.result = take("<Qi")
            self.text = take_str()
        elif kind == LOG:
            (self.level,) = take("<i")
            self.message = take_str()
        elif kind == CALL:
            self.request, self.function, self.number, n = take("<QiiI")
            assert n <= 8, "CALL with %d arguments" % n
            self.args = [take_str() for _ in range(n)]
        elif kind in (DONE, PONG):
            (self.value,) = take("<Q")
        elif kind == UNLOADED:
            pass
        elif kind == FAILED:
            (self.seq,) = take("<Q")
            self.reason = take_str()
        else:
            raise AssertionError("the child sent an unknown frame type %d" % kind)
        assert at == len(body), "%s has %d trailing bytes" % (self.name, len(body) - at)

    def __repr__(self) -> str:
        fields = {k: v for k, v in vars(self).items() if k not in ("kind", "body", "name")}
        return "%s%r" % (self.name, fields)


class FakeBot:
    """Spawns ``script`` with the wire on fd 3 and talks to it."""

    def __init__(self, script: str, env: Optional[Dict[str, str]] = None, versions: str = "1",
                 args: Optional[List[str]] = None, page: bool = False) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock = ours
        child_env = dict(os.environ)
        child_env["PYTHONPATH"] = SDK + os.pathsep + child_env.get("PYTHONPATH", "")
        child_env.update({"ROOMKIT_WIRE_FD": "3", "ROOMKIT_WIRE_VERSIONS": versions, "ROOMKIT_PLUGIN_NAME": "test"})
        child_env.pop("ROOMKIT_PROGRESS_FD", None)
        # The progress page (§8.3): a shared memory file of sizeof(roomkit_wire_progress) on fd 4.
        self.page = None
        page_fd = -1
        if page:
            page_fd = os.memfd_create("progress")
            os.ftruncate(page_fd, 40)
            self.page = mmap.mmap(page_fd, 40)
            child_env["ROOMKIT_PROGRESS_FD"] = "4"
        child_env.update(env or {})
        fd = theirs.fileno()

        def wire_fds() -> None:
            # fds 3 and 4 may be the parent's own: move ours above them first.
            wire = os.dup(fd)
            progress = os.dup(page_fd) if page_fd >= 0 else -1
            os.dup2(wire, 3)
            if progress >= 0:
                os.dup2(progress, 4)

        self.process = subprocess.Popen(
            [sys.executable, script] + (args or []), env=child_env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=[3, 4] if page else [3], preexec_fn=wire_fds)
        theirs.close()
        if page_fd >= 0:
            os.close(page_fd)
        self.buffer = b""
        self.frames: List[Parsed] = []
        self.logs: List[Optional[str]] = []

    def progress(self) -> Dict[str, int]:
        """The progress page's fields as the child left them."""
        busy_seq, since, done, what, crash_errno = struct.unpack_from("<QQQii", self.page, 0)
        return {"busy_seq": busy_seq, "busy_since_ns": since, "done_seq": done, "busy_what": what,
                "crash_errno": crash_errno}

    # -- sending -------------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def load(self, config: str = "{}", timeout_ms: int = 50, room_config: Optional[str] = None) -> None:
        """LOAD; ``room_config`` (the second str) only when given."""
        self.send(frame(LOAD, struct.pack("<I", timeout_ms) + s(config) + (b"" if room_config is None else s(room_config))))

    def url(self, request: int, url: str, deadline_us: int = 50000) -> None:
        self.send(frame(URL, struct.pack("<QI", request, deadline_us) + s(url)))

    def reply(self, request: int, result: int = 0, text: Optional[str] = None) -> None:
        self.send(frame(REPLY, struct.pack("<Qi", request, result) + s(text)))

    def ping(self, nonce: int) -> None:
        self.send(frame(PING, struct.pack("<Q", nonce)))

    def unload(self) -> None:
        self.send(frame(UNLOAD))

    def export_state(self, request: int) -> None:
        self.send(frame(EXPORT_STATE, struct.pack("<Q", request)))

    def import_state(self, request: int, state: Optional[str]) -> None:
        self.send(frame(IMPORT_STATE, struct.pack("<Q", request) + s(state)))

    # -- receiving -----------------------------------------------------------------------
    def _fill(self, timeout: float) -> bool:
        readable, _, _ = select.select([self.sock], [], [], timeout)
        if not readable:
            return False
        data = self.sock.recv(1 << 20)
        if not data:
            raise EOFError("the child closed the wire")
        self.buffer += data
        while len(self.buffer) >= 5:
            length, kind = struct.unpack_from("<IB", self.buffer, 0)
            assert 1 <= length <= 64 * 1024 * 1024, "frame length %d" % length
            if len(self.buffer) - 4 < length:
                break
            self.frames.append(Parsed(kind, self.buffer[5:4 + length]))
            self.buffer = self.buffer[4 + length:]
        return True

    def next(self, timeout: float = 5.0, skip_logs: bool = True) -> Parsed:
        deadline = time.monotonic() + timeout
        while True:
            while self.frames:
                got = self.frames.pop(0)
                if skip_logs and got.kind == LOG:
                    self.logs.append(got.message)
                    continue
                return got
            left = deadline - time.monotonic()
            if left <= 0 or not self._fill(left):
                raise TimeoutError("no frame from the child within %.1f s" % timeout)

    def expect(self, kind: int, timeout: float = 5.0) -> Parsed:
        got = self.next(timeout)
        assert got.kind == kind, "expected %s, got %r" % (NAMES[kind], got)
        return got


    def handshake(self, config: str = "{}", timeout_ms: int = 50, room_config: Optional[str] = None) -> Parsed:
        self.logs = []
        hello = self.expect(HELLO)
        assert hello.stage == 0, hello
        self.load(config, timeout_ms, room_config)
        loaded = self.expect(LOADED)
        assert loaded.result == 0, loaded
        return hello

    def close(self, timeout: float = 5.0) -> Tuple[int, str, str]:
        """Closes the wire, waits for the exit; (code, stdout, stderr)."""
        try:
            self.sock.close()
        except OSError:
            pass
        try:
            out, err = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, err = self.process.communicate()
        return self.process.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
