"""py-echo: the Python example plugin (docs/PLUGINS.md, "Plugins in Python").

- the magix event payload "!py" is answered with the magix event "reply"
  {"text": "pong-py"} (the SDK's example);
- "!count" answers "count" {"n": <how many "!count" this room has seen>}, kept
  in the plugin's storage, so it survives restarts and reloads;
- every image URL the bot sends gets "?via=py" appended (urlInterrupter);
- the errors of its own actions are logged.

roombot runs it as its own process: plugins.json beside it has
"command": ["python3", "echo_plugin.py"].
"""
import os
import sys

try:
    from roomkit_plugin import Plugin
except ImportError:  # run from a RoomKit checkout without `pip install ./sdk/python`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python"))
    from roomkit_plugin import Plugin

plugin = Plugin()


@plugin.url_interrupter
def rewrite(url):
    return url + "?via=py"  # the new URL; None or an exception = a failure


@plugin.on_magix
def on_magix(room, event):  # event: the dict the event log shows ("from", "magixEvent", "payload", "seq", ...)
    if event["payload"] == "!py":
        plugin.host.dispatch_magix(room, "reply", {"text": "pong-py"})
    elif event["payload"] == "!count":
        key = "count:" + room
        n = int(plugin.host.kv.get(key, "0")) + 1
        plugin.host.kv[key] = str(n)
        plugin.host.dispatch_magix(room, "count", {"n": n})


@plugin.on_throw_error
def on_throw_error(domain, code, message):
    plugin.host.log("%s failed: %d %s" % (domain, code, message), "warning")


if __name__ == "__main__":
    plugin.run()
