"""The plugin wire, version 1 (docs/PLUGIN-WIRE.md), child side.

One thread, no asyncio: ``os.read`` into a buffer, frames cut by their
length, handled in order; URL requests and PINGs jump the queue of event
records (served between records, never inside a handler). Host calls and
DONE are buffered and leave in one ``os.write`` per batch.
"""

import json
import os
import select
import struct
import sys
import time
from collections import deque
from typing import Any, Deque, Dict, Optional, Tuple

from . import frames
from .frames import (ANSWER, CALL, CHECK_EVERY_S, DONE, EVENTS, EXIT_BAD_FRAME, EXIT_BY_HAND, EXIT_OK, EXIT_SETUP,
                     EXPORT_STATE, FAILED, FUNCTIONS, HOOK_CONFIG_CHANGED, HOOK_EXPORT, HOOK_IMPORT, HOOK_PLAYER, HOOK_ROOM,
                     HOOK_THROW_ERROR, HOOK_URL, IMPORT_STATE, LOAD, LOADED, LOG, PING, PONG, REPLY, STAGE_NO_VERSION,
                     TEXT_JSON, TEXT_RAW, UNLOAD, UNLOADED, URL, WIRE_VERSION, BadFrame, Closed, _ANSWER_HEAD,
                     _CALL_HEAD, _DONE, _FAILED_HEAD, _LOG_HEAD, _REPLY, _U32, _U64, _URL, _exactly, _s, _str_at, _text,
                     encode_str, frame, hello, parse_records, Reader)
from .progress import (BUSY_EVENT, BUSY_LOAD, BUSY_TIMER, BUSY_UNLOAD, BUSY_URL, FLAG_PROGRESS_PAGE, _PROGRESS,
                       Progress)


class Connection:
    """The child's side of one wire connection, driving a ``Plugin``."""

    def __init__(self, plugin: Any, fd: int) -> None:
        self.plugin = plugin
        self.fd = fd
        self.reader = Reader()
        self.out = bytearray()
        self.inbox: Deque[Tuple[int, bytes]] = deque()   # frames in order
        self.urgent: Deque[Tuple[int, bytes]] = deque()  # URL requests waiting for the handler to return
        self.replies: Dict[int, Tuple[int, Optional[bytes]]] = {}
        self.next_request = 0
        self.timeout_s = 0.05
        self.last_done_at = time.monotonic()
        self.done_seq = 0       # last record finished
        self.reported_seq = 0   # last seq sent in DONE
        self.in_handler = False
        self.unloaded = False
        self.progress: Optional[Progress] = None
        os.set_blocking(fd, False)

    def busy(self, what: int) -> None:
        self.in_handler = True
        if self.progress is not None:
            self.progress.busy(what, 0, self.done_seq)

    def idle(self) -> None:
        self.in_handler = False
        if self.progress is not None:
            self.progress.idle(self.done_seq)

    # -- output ----------------------------------------------------------------------------
    def notify(self, method: str, args: Dict[str, Any]) -> None:
        if method == "log":
            message = args["message"].encode("utf-8", "replace")
            self.out += _LOG_HEAD.pack(9 + len(message), LOG, args["level"], len(message)) + message
            return
        self._call(0, method, args)

    def request(self, method: str, args: Dict[str, Any]) -> Any:
        self.next_request += 1
        request = self.next_request
        self._call(request, method, args)
        self.flush()
        result, text = self._wait_reply(request)
        if method in TEXT_RAW:
            return _text(text)
        if method in TEXT_JSON:
            return None if text is None else json.loads(_text(text))
        return result

    def _call(self, request: int, method: str, args: Dict[str, Any]) -> None:
        function, names = FUNCTIONS[method]
        parts = [_s(None if args.get(n) is None else str(args[n]).encode("utf-8")) for n in names]
        body = b"".join(parts)
        number = int(args.get("index", 0)) if method == "put_scenes" else 0
        self.out += _CALL_HEAD.pack(21 + len(body), CALL, request, function, number, len(names)) + body

    def failed(self, seq: int, reason: str) -> None:
        """FAILED: record ``seq``'s handler raised (one failed call)."""
        body = encode_str(reason[:4096])
        self.out += _FAILED_HEAD.pack(9 + len(body), FAILED, seq) + body

    def answer(self, request: int, result: int, text: Optional[str]) -> None:
        body = encode_str(text)
        self.out += _ANSWER_HEAD.pack(13 + len(body), ANSWER, request, result) + body

    def mark_done(self) -> None:
        """Appends DONE for the records finished since the last one, if any."""
        if self.done_seq != self.reported_seq:
            self.out += _DONE.pack(9, DONE, self.done_seq)
            self.reported_seq = self.done_seq
            self.last_done_at = time.monotonic()

    def flush(self) -> None:
        self.mark_done()
        out = self.out
        while out:
            try:
                n = os.write(self.fd, out)
                del out[:n]
            except BlockingIOError:
                # The bot is not reading right now: keep reading its frames so it never blocks on us.
                readable, _, _ = select.select([self.fd], [self.fd], [])
                if readable:
                    self._read_some()
            except (BrokenPipeError, ConnectionResetError):
                raise Closed()

    # -- input -----------------------------------------------------------------------------
    def _read_some(self) -> bool:
        """Reads what is there (never blocks); False when nothing was."""
        try:
            data = os.read(self.fd, 1 << 20)
        except BlockingIOError:
            return False
        except ConnectionResetError:
            raise Closed()
        if not data:
            raise Closed()
        for kind, body in self.reader.feed(data):
            self._sort(kind, body)
        return True

    def _sort(self, kind: int, body: bytes) -> None:
        if kind == REPLY:
            if len(body) < 16:
                raise BadFrame("REPLY frame shorter than its fields")
            request, result, _ = _REPLY.unpack_from(body, 0)
            text, at = _str_at(body, 12)
            _exactly(body, at, "REPLY")
            self.replies[request] = (result, text)
        elif kind == PING:
            if len(body) != 8:
                raise BadFrame("PING frame must have 8 bytes, has %d" % len(body))
            self.out += frame(PONG, body)
            if not self.in_handler:
                self.flush()
        elif kind == URL:
            self.urgent.append((kind, body))
        elif kind in (LOAD, EVENTS, UNLOAD, EXPORT_STATE, IMPORT_STATE):
            self.inbox.append((kind, body))
        else:
            raise BadFrame("unknown frame type %d" % kind)

    def _wait(self, timeout: Optional[float]) -> None:
        select.select([self.fd], [], [], timeout)
        self._read_some()

    def _wait_reply(self, request: int) -> Tuple[int, Optional[bytes]]:
        while request not in self.replies:
            self.flush()
            self._wait(None)
        return self.replies.pop(request)

    # -- serving ---------------------------------------------------------------------------
    def serve(self) -> None:
        plugin = self.plugin
        timers = plugin._timers
        while not self.unloaded:
            if self.urgent:
                self._url(self.urgent.popleft()[1])
            elif self.inbox:
                kind, body = self.inbox.popleft()
                self._frame(kind, body)
            else:
                self.flush()
                self._wait(timers.timeout())
                self._timers()

    def _timers(self) -> None:
        timers = self.plugin._timers
        if timers.timeout() == 0:
            self.busy(BUSY_TIMER)
            timers.run_due(self.plugin._run_timer)
            self.idle()

    def _frame(self, kind: int, body: bytes) -> None:
        plugin = self.plugin
        if kind != EVENTS:
            self.mark_done()  # what follows (UNLOADED, an export) comes after the records before it
        if kind == EVENTS:
            bodies = [body]
            inbox = self.inbox
            while inbox and inbox[0][0] == EVENTS:  # frames read together run as one batch
                bodies.append(inbox.popleft()[1])
            self._events(bodies)
        elif kind == LOAD:
            if len(body) < 8:
                raise BadFrame("LOAD frame shorter than its fields")
            (timeout_ms,) = _U32.unpack_from(body, 0)
            config, at = _str_at(body, 4)
            layers = None  # room_config: the manifest's roomConfig (a later field: absent from older bots)
            if at < len(body):
                layers, at = _str_at(body, at)
            _exactly(body, at, "LOAD")
            self.timeout_s = max(timeout_ms, 1) / 1000.0
            self.busy(BUSY_LOAD)
            try:
                parsed = None if config is None else json.loads(_text(config) or "null")
                room_config = None if layers is None else json.loads(_text(layers) or "null")
            except ValueError as error:
                raise BadFrame("LOAD's config or room_config is not JSON: %s" % error)
            result, _ = plugin._on_load(parsed, room_config if isinstance(room_config, dict) else None)
            self.idle()
            self.out += frame(LOADED, struct.pack("<i", result))
            self.flush()
        elif kind == UNLOAD:
            _exactly(body, 0, "UNLOAD")
            self.busy(BUSY_UNLOAD)
            plugin._on_unload()
            self.idle()
            self.out += frame(UNLOADED)
            self.flush()
            self.unloaded = True
        elif kind == EXPORT_STATE:
            if len(body) != 8:
                raise BadFrame("EXPORT_STATE frame must have 8 bytes, has %d" % len(body))
            (request,) = _U64.unpack_from(body, 0)
            self.in_handler = True
            ok, state = plugin._on_export_state()
            self.in_handler = False
            self.answer(request, 0 if ok else -1, state)
            self.flush()
        elif kind == IMPORT_STATE:
            if len(body) < 12:
                raise BadFrame("IMPORT_STATE frame shorter than its fields")
            (request,) = _U64.unpack_from(body, 0)
            state, at = _str_at(body, 8)
            _exactly(body, at, "IMPORT_STATE")
            self.in_handler = True
            result = plugin._on_import_state(_text(state) or "")
            self.in_handler = False
            self.answer(request, result, None)
            self.flush()

    def _url(self, body: bytes) -> None:
        if len(body) < 16:
            raise BadFrame("URL frame shorter than its fields")
        request, _deadline_us, _ = _URL.unpack_from(body, 0)
        url, at = _str_at(body, 12)
        _exactly(body, at, "URL")
        self.busy(BUSY_URL)
        rewritten = self.plugin._on_url(_text(url) or "")
        self.idle()
        self.answer(request, 0 if rewritten is not None else -1, rewritten)
        self.flush()

    def _events(self, bodies: Any) -> None:
        records, values = parse_records(bodies)
        plugin = self.plugin
        room_event = plugin._on_room_event
        wants_room = bool(plugin._room or plugin._magix)
        only_magix = not plugin._room
        clock = time.monotonic
        next_check = clock() + CHECK_EVERY_S
        value = 0
        progress = self.progress
        page = progress.page if progress is not None else None
        mark, monotonic_ns = _PROGRESS.pack_into, time.monotonic_ns  # the page's stores, inlined (per record)
        self.in_handler = True
        try:
            for rtype, seq, number, a, b in records:
                if page is not None:
                    mark(page, 0, seq, monotonic_ns(), self.done_seq, BUSY_EVENT)
                ok = True
                if rtype == 1:
                    fields = values[value]
                    value += 1
                    if wants_room and (number == 8 or not only_magix):
                        ok = room_event(number, _text(a) or "", fields)
                elif rtype == 3:
                    ok = plugin._on_throw_error(_text(a) or "", number, _text(b) or "")
                elif rtype == 4:
                    ok = plugin._on_config_changed(_text(a), values[value])
                    value += 1
                elif rtype == 2:
                    if plugin._player:
                        ok = plugin._on_player_event(number, _text(a) or "", values[value])
                    value += 1
                if not ok and frames.SEND_FAILED:
                    self.failed(seq, plugin.last_failure)
                self.done_seq = seq
                now = clock()
                if now >= next_check:
                    self._between_records(now)
                    next_check = clock() + CHECK_EVERY_S
        except BaseException:
            # sys.exit() or MemoryError in a handler: the process ends with the
            # page naming the record it died in (no idle store).
            self.in_handler = False
            raise
        self.in_handler = False
        if progress is not None:
            progress.idle(self.done_seq)

    def _between_records(self, now: float) -> None:
        """Between records, every CHECK_EVERY_S: let URL requests and PINGs
        in, run due timers, and send DONE when half a call's budget has
        passed since the last one (PLUGIN-WIRE.md 8.1)."""
        self.in_handler = False
        try:
            while self._read_some():
                pass
            while self.urgent:
                self._url(self.urgent.popleft()[1])
            self._timers()
            if now - self.last_done_at >= self.timeout_s / 2:  # the bot judges a record late after timeout_s without DONE
                self.flush()
        finally:
            self.in_handler = True


def hooks_of(plugin: Any) -> int:
    bits = HOOK_CONFIG_CHANGED
    if plugin._url is not None:
        bits |= HOOK_URL
    if plugin._throw_error:
        bits |= HOOK_THROW_ERROR
    if plugin._room or plugin._magix:
        bits |= HOOK_ROOM
    if plugin._player:
        bits |= HOOK_PLAYER
    if plugin._export is not None:
        bits |= HOOK_EXPORT
    if plugin._import is not None:
        bits |= HOOK_IMPORT
    return bits


BY_HAND = """%s is a RoomKit plugin: roombot starts it and talks to it over fd 3 (docs/PLUGIN-WIRE.md).
Run it from a manifest entry such as
  {"name": "my-plugin", "command": ["python3", "%s"], "abi": 1, "hooks": ["magix"]}
with `roombot simulate --manifest plugins.json --script scenario.json` or `roombot run`.
"""


def serve(plugin: Any) -> None:
    """Runs ``plugin`` over the wire until UNLOAD or end-of-file, then exits the process."""
    script = sys.argv[0] if sys.argv and sys.argv[0] else "this program"
    fd_text = os.environ.get("ROOMKIT_WIRE_FD")
    try:
        fd = int(fd_text) if fd_text is not None else -1
        os.fstat(fd)
    except (ValueError, OSError):
        sys.stderr.write(BY_HAND % (script, os.path.basename(script)))
        sys.exit(EXIT_BY_HAND)
    if plugin.name is None:
        plugin.name = os.environ.get("ROOMKIT_PLUGIN_NAME")
    offered = os.environ.get("ROOMKIT_WIRE_VERSIONS", "1")
    versions = set()
    for part in offered.split(","):
        try:
            versions.add(int(part.strip()))
        except ValueError:
            pass
    connection = Connection(plugin, fd)
    # stdout and stderr are pipes into the bot's log (never the wire): line
    # buffered, so a print() shows up when it happens.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(line_buffering=True)
        except (AttributeError, ValueError):
            pass
    if WIRE_VERSION not in versions:
        connection.out += hello(0, STAGE_NO_VERSION,
                                "wire versions offered %s, this plugin speaks %d" % (offered, WIRE_VERSION), version=0)
        try:
            connection.flush()
        except Closed:
            pass
        sys.exit(EXIT_OK)
    flags = 0
    page_fd = os.environ.get("ROOMKIT_PROGRESS_FD")
    if page_fd is not None:
        try:
            connection.progress = Progress(int(page_fd))
            flags |= FLAG_PROGRESS_PAGE
        except (ValueError, OSError) as error:
            sys.stderr.write("roomkit_plugin: ROOMKIT_PROGRESS_FD=%s unusable (%s); going on without it\n" % (page_fd, error))
    connection.out += hello(hooks_of(plugin), flags=flags)
    plugin._connect(connection)
    code = EXIT_OK
    try:
        connection.serve()
    except Closed:
        code = EXIT_OK
    except BadFrame as error:
        sys.stderr.write("roomkit_plugin: bad frame from the bot: %s\n" % error)
        code = EXIT_BAD_FRAME
    except MemoryError:
        code = EXIT_SETUP  # over the memory limit: tell the bot why before exiting
        if connection.progress is not None:
            connection.progress.out_of_memory()
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(code)
