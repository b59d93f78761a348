"""The plugin wire's frames, version 1 (docs/PLUGIN-WIRE.md §2, §12): the
constants, the encoders of what a child sends, and the decoders of what the
bot sends. No I/O here (``wire.py`` does it)."""

import json
import struct
from typing import Any, Dict, List, Optional, Sequence, Tuple

WIRE_VERSION = 1
ABI_MAJOR, ABI_MINOR = 1, 1
MAX_FRAME = 64 * 1024 * 1024
NULL = 0xFFFFFFFF

# Frame types (PLUGIN-WIRE.md §12).
LOAD, EVENTS, URL, REPLY, UNLOAD, EXPORT_STATE, IMPORT_STATE, PING = 1, 2, 5, 6, 7, 9, 10, 11
HELLO, LOADED, ANSWER, LOG, CALL, UNLOADED, DONE, PONG, FAILED = 64, 65, 66, 67, 68, 69, 70, 71, 72
# FAILED (72, u64 seq, str reason): a record whose handler raised; the bot
# counts it as one failed call (PLUGIN-WIRE.md §8.4). False only for tests
# that want the bare DONE-only behaviour.
SEND_FAILED = True

# HELLO hook bits.
HOOK_URL, HOOK_THROW_ERROR, HOOK_ROOM, HOOK_PLAYER = 1, 2, 4, 8
HOOK_CONFIG_CHANGED, HOOK_EXPORT, HOOK_IMPORT = 16, 32, 64
STAGE_OK, STAGE_SETUP, STAGE_NO_VERSION = 0, 6, 7
NO_IMPORT = -100

# How often a long EVENTS frame looks at the socket between records (URL
# requests and PINGs jump the queue; timers run; DONE goes out).
CHECK_EVERY_S = 0.001

# Exit codes (§10).
EXIT_OK, EXIT_BY_HAND, EXIT_SETUP, EXIT_BAD_FRAME = 0, 64, 70, 71

# Host call functions (§6): name -> (number, argument names in order).
FUNCTIONS: Dict[str, Tuple[int, Tuple[str, ...]]] = {
    "dispatch_magix": (1, ("room", "event", "payload", "to")),
    "set_global_state": (2, ("room", "patch")),
    "insert_image": (3, ("room", "image")),
    "put_scenes": (4, ("room", "dir", "scenes")),
    "room_state": (5, ("room",)),
    "set_member_state": (6, ("room", "patch")),
    "set_extra_info": (7, ("room", "key", "value")),
    "publish_stream": (8, ("room", "stream", "extra")),
    "unpublish_stream": (9, ("room", "stream")),
    "login_room": (10, ("room",)),
    "logout_room": (11, ("room",)),
    "switch_room": (12, ("from", "to")),
    "room_members": (13, ("room",)),
    "config_get": (14, ("room",)),
    "kv_get": (15, ("key",)),
    "kv_set": (16, ("key", "value")),
    "kv_delete": (17, ("key",)),
    "kv_scan": (18, ("prefix",)),
}
# Calls whose answer is text (JSON decoded for these), not a result code.
TEXT_JSON = {"room_state", "room_members", "config_get", "kv_scan"}
TEXT_RAW = {"kv_get"}

_HEADER = struct.Struct("<IB")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_RECORD = struct.Struct("<BQqI")  # type, seq, number, len(a)
_URL = struct.Struct("<QII")      # request, deadline_us, len(url)
_REPLY = struct.Struct("<QiI")    # request, result, len(text)
_ANSWER_HEAD = struct.Struct("<IBQi")
_DONE = struct.Struct("<IBQ")
_FAILED_HEAD = struct.Struct("<IBQ")
_CALL_HEAD = struct.Struct("<IBQiiI")
_LOG_HEAD = struct.Struct("<IBiI")


class BadFrame(Exception):
    """The bot sent something this side cannot parse: the child exits 71."""


class Closed(Exception):
    """End-of-file on the wire: the bot is gone or gave up on us; exit now."""


def _s(data: Optional[bytes]) -> bytes:
    return _U32.pack(NULL) if data is None else _U32.pack(len(data)) + data


def encode_str(text: Optional[str]) -> bytes:
    return _s(None if text is None else text.encode("utf-8"))


def frame(kind: int, body: bytes = b"") -> bytes:
    return _HEADER.pack(len(body) + 1, kind) + body


def hello(hooks: int, stage: int = STAGE_OK, message: str = "", version: int = WIRE_VERSION, flags: int = 0) -> bytes:
    return frame(HELLO, struct.pack("<IIIHHi", version, flags, hooks, ABI_MAJOR, ABI_MINOR, stage) + encode_str(message))



class Reader:
    """Cuts frames from bytes as they arrive (any split, many per read).

    Frames are ``memoryview`` slices of what ``os.read`` returned (a frame
    split across reads costs one join of its parts); ``parse_records``
    copies an EVENTS body once before slicing its records."""

    def __init__(self) -> None:
        self.partial = b""  # the start of a frame whose rest has not arrived

    def feed(self, data: bytes) -> List[Tuple[int, memoryview]]:
        if self.partial:
            data = self.partial + data
            self.partial = b""
        view = memoryview(data)
        frames = []
        at, end = 0, len(data)
        unpack = _HEADER.unpack_from
        while end - at >= 5:
            length, kind = unpack(data, at)
            if length < 1 or length > MAX_FRAME:
                raise BadFrame("frame length %d out of bounds (1...%d)" % (length, MAX_FRAME))
            if end - at - 4 < length:
                break
            frames.append((kind, view[at + 5:at + 4 + length]))
            at += 4 + length
        if at < end:
            self.partial = data[at:]
        return frames


def _str_at(body: bytes, at: int) -> Tuple[Optional[bytes], int]:
    if at + 4 > len(body):
        raise BadFrame("a str runs past the end of the frame")
    (n,) = _U32.unpack_from(body, at)
    at += 4
    if n == NULL:
        return None, at
    if at + n > len(body):
        raise BadFrame("a str runs past the end of the frame")
    return body[at:at + n], at + n


def _text(data: Any) -> Optional[str]:
    """A str field (bytes or a memoryview of them) as text."""
    if data is None:
        return None
    try:
        return str(data, "utf-8")
    except UnicodeDecodeError as error:
        raise BadFrame("a str is not UTF-8: %s" % error)


def _exactly(body: bytes, at: int, what: str) -> None:
    if at != len(body):
        raise BadFrame("%s frame has %d trailing bytes" % (what, len(body) - at))


Record = Tuple[int, int, int, Optional[bytes], Optional[bytes]]


def parse_records(bodies: Sequence[Any]) -> Tuple[List[Record], List[Any]]:
    """EVENTS bodies (one or several frames read together) as (type, seq,
    number, a, b) records (a and b raw bytes), and the JSON values of the
    records that carry JSON (room, player and configChanged records, in
    order), decoded with one ``json.loads`` of them all: a third of the cost
    of one call per record, and one call for a run of one-record frames."""
    records: List[Record] = []
    texts: List[Any] = []
    append, text = records.append, texts.append
    unpack, u32 = _RECORD.unpack_from, _U32.unpack_from
    for view in bodies:
        # One copy of the frame, then bytes slices: CPython makes a bytes
        # slice faster than a memoryview slice, which costs more per record
        # than the copy saves.
        body = bytes(view)
        size = len(body)
        if size < 4:
            raise BadFrame("EVENTS frame shorter than its count")
        (count,) = u32(body, 0)
        at = 4
        try:
            for _ in range(count):
                rtype, seq, number, na = unpack(body, at)
                if rtype < 1 or rtype > 4:
                    raise BadFrame("an EVENTS record of unknown type %d" % rtype)
                at += 21
                if na == NULL:
                    a = None
                else:
                    a = body[at:at + na]
                    at += na
                (nb,) = u32(body, at)
                at += 4
                if nb == NULL:
                    b = None
                else:
                    b = body[at:at + nb]
                    at += nb
                if at > size:
                    raise BadFrame("an EVENTS record runs past the end of the frame")
                append((rtype, seq, number, a, b))
                if rtype != 3:
                    text(b"null" if b is None else b)
        except struct.error:
            raise BadFrame("an EVENTS record runs past the end of the frame")
        _exactly(body, at, "EVENTS")
    if not texts:
        return records, []
    try:
        values = json.loads((b"[" + b",".join(texts) + b"]").decode("utf-8"))
    except ValueError as error:  # UnicodeDecodeError and JSONDecodeError both are
        raise BadFrame("an EVENTS record's payload is not JSON: %s" % error)
    if len(values) != len(texts):  # a payload like `1,2` smuggled a second value in
        raise BadFrame("an EVENTS record's payload is not one JSON value")
    return records, values
