"""RoomKit plugins in Python: the SDK for plugins that run as their own process.

    from roomkit_plugin import Plugin
    plugin = Plugin()

    @plugin.on_magix
    def on_magix(room, event):
        if event["payload"] == "!py":
            plugin.host.dispatch_magix(room, "reply", {"text": "pong-py"})

    if __name__ == "__main__":
        plugin.run()

A manifest entry ``{"name": "py-echo", "command": ["python3", "echo_plugin.py"],
"abi": 1, "hooks": ["magix"]}`` makes roombot start it and talk to it over the
plugin wire (docs/PLUGIN-WIRE.md). Standard library only, Python 3.9+.
docs/PLUGINS.md, "Plugins in Python", is the guide.
"""

from .config import Config
from .host import Host, HostError, KV, KVFullError, LOG_LEVELS
from .plugin import Plugin

__version__ = "1.0.0"

__all__ = ["Plugin", "Host", "HostError", "KV", "KVFullError", "Config", "LOG_LEVELS", "__version__"]
