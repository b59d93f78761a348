# A minimal plugin child from docs/PLUGIN-WIRE.md, standard library only
# (see Tests/RoomKitBotTests/WirePythonFixture.swift).
import json, os, signal, struct, sys, time
FD = int(os.environ["ROOMKIT_WIRE_FD"])
record, mode = sys.argv[1], sys.argv[2]

def send(kind, body):
    os.write(FD, struct.pack("<IB", len(body) + 1, kind) + body)

def text(value):
    if value is None:
        return struct.pack("<I", 0xFFFFFFFF)
    data = value.encode()
    return struct.pack("<I", len(data)) + data

def take(body, at):
    (n,) = struct.unpack_from("<I", body, at)
    if n == 0xFFFFFFFF:
        return None, at + 4
    return body[at + 4:at + 4 + n].decode(), at + 4 + n

if "1" not in os.environ.get("ROOMKIT_WIRE_VERSIONS", "").split(","):
    send(64, struct.pack("<IIIHHi", 0, 0, 0, 1, 1, 7) + text("no common wire version"))
    sys.exit(0)
send(64, struct.pack("<IIIHHi", 1, 0, 4 | 1, 1, 1, 0) + text(""))
out = os.open(record, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

def misbehave():
    if mode == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif mode == "exit3":
        os._exit(3)
    elif mode == "hang":
        time.sleep(100000)

def handle(kind, body):
    if kind == 1:
        secrets = [k for k in ("ROOMBOT_SERVICE_TOKEN", "ROOMBOT_TOKEN", "ROOMD_SECRET", "ROOMKIT_TEST_SECRET") if k in os.environ]
        send(67, struct.pack("<i", 1) + text("secrets seen: " + (",".join(secrets) or "none")))
        print("hello from python stdout", flush=True)
        # A fire-and-forget action to a room that does not exist: the bot logs its failure.
        send(68, struct.pack("<QiiI", 0, 1, 0, 4) + text("no-such-room") + text("x") + text("{}") + text(None))
        send(65, struct.pack("<i", 0))
        if mode == "stall":  # stuck outside any event, as in a timer that never returns
            time.sleep(100000)
    elif kind == 2:
        (count,) = struct.unpack_from("<I", body, 0)
        at, last = 4, 0
        for _ in range(count):
            rtype, seq, number = struct.unpack_from("<BQq", body, at)
            room, at = take(body, at + 17)
            payload, at = take(body, at)
            if rtype == 1 and number == 8 and mode == "echo":
                if json.loads(payload).get("payload") == "!ping":
                    send(68, struct.pack("<QiiI", 0, 1, 0, 4) + text(room) + text("reply") + text('{"text":"pong-py"}') + text(None))
            elif rtype == 1 and number == 8:
                if mode != "none":
                    misbehave()
                os.write(out, payload.encode() + b"\n")
            last = seq
        send(70, struct.pack("<Q", last))
    elif kind == 5:
        (request,) = struct.unpack_from("<Q", body, 0)
        url, _ = take(body, 12)
        send(66, struct.pack("<Qi", request, 0) + text(url + "?via=py"))
    elif kind == 7:
        os.write(out, b'{"unloaded":true}\n')
        send(69, b"")
        sys.exit(0)
    elif kind == 11:
        send(71, body)
    elif kind == 9:
        send(66, body + struct.pack("<i", 0) + text(None))
    elif kind == 10:
        send(66, body[:8] + struct.pack("<i", -100) + text(None))
    else:
        sys.exit(71)

buf = b""
while True:
    chunk = os.read(FD, 65536)
    if not chunk:
        sys.exit(0)
    buf += chunk
    while len(buf) >= 5:
        (n,) = struct.unpack_from("<I", buf, 0)
        if len(buf) < 4 + n:
            break
        kind, body, buf = buf[4], buf[5:4 + n], buf[4 + n:]
        handle(kind, body)
