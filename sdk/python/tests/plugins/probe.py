"""A plugin that exercises the whole SDK surface for tests/test_wire.py.

Magix payloads are commands: "!echo" answers with the event it got,
"!kv KEY VALUE" stores and reads back, "!raise" raises, "!exit" exits 3,
"!members" reads the room's members, "!timer" starts a 10 ms one-shot timer,
"!config" answers with plugin.config for the room, "!slow" sleeps 0.2 s,
"!oom" allocates until MemoryError, "!segv" kills itself with SIGSEGV.
"""
import json
import sys
import time

from roomkit_plugin import Plugin

plugin = Plugin()
state = {"count": 0, "imported": None}


@plugin.on_load
def loaded(config):
    plugin.host.log("probe loaded with %s" % json.dumps(config, sort_keys=True))


@plugin.url_interrupter
def rewrite(url):
    if "raise" in url:
        raise ValueError("no such url")
    if "none" in url:
        return None
    if "number" in url:
        return 42
    return url + "?via=py"


@plugin.on_magix
def on_magix(room, event):
    state["count"] += 1
    payload = event.get("payload")
    if payload == "!echo":
        plugin.host.dispatch_magix(room, "echo", event)
    elif isinstance(payload, str) and payload.startswith("!kv "):
        _, key, value = payload.split(" ", 2)
        plugin.host.kv[key] = value
        plugin.host.dispatch_magix(room, "kv", {"value": plugin.host.kv.get(key), "scan": plugin.host.kv.scan(key[:1])})
    elif payload == "!raise":
        raise RuntimeError("boom from a handler")
    elif payload == "!exit":
        sys.exit(3)
    elif payload == "!members":
        plugin.host.dispatch_magix(room, "members", plugin.host.room_members(room))
    elif payload == "!timer":
        plugin.host.set_timer(10, lambda: plugin.host.dispatch_magix(room, "timer", "fired"))
    elif payload == "!config":
        plugin.host.dispatch_magix(room, "config", plugin.config.for_room(room))
    elif payload == "!slow":
        time.sleep(0.2)
    elif payload == "!print":
        print("PRINTED-MARKER")
    elif payload == "!oom":
        blocks = []
        while True:
            blocks.append(bytearray(1 << 20))
    elif payload == "!segv":
        import os
        import signal
        os.kill(os.getpid(), signal.SIGSEGV)


@plugin.on_room_event
def on_room_event(room, event):
    if event["event"] == "userUpdate":
        plugin.host.log("users %s" % ",".join(event["users"]))


@plugin.on_throw_error
def on_throw_error(domain, code, message):
    plugin.host.log("error %s %d %s" % (domain, code, message), "warning")


@plugin.on_config_changed
def changed(room, config):
    plugin.host.log("config %s %s" % (room, json.dumps(config, sort_keys=True)))


@plugin.export_state
def export():
    return json.dumps({"count": state["count"]})


@plugin.import_state
def import_(text):
    if text == "refuse":
        return False
    state["imported"] = json.loads(text)
    plugin.host.log("imported %s" % text)


@plugin.on_unload
def unloading():
    plugin.host.log("unloading after %d" % state["count"])


if __name__ == "__main__":
    plugin.run()
