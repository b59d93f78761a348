"""@@name@@: a RoomKit plugin in Python (roombot new-plugin @@name@@ --lang python).

It answers the magix event "ping" with "pong" {"greeting": <config greeting>,
"to": <the sender's memberId>}. The bot runs this script as its own process
(plugins.json, "command") and talks to it over the plugin wire.
"""
from roomkit_plugin import Plugin

plugin = Plugin()


def reply(event, config):
    """The (name, payload) to answer `event` with, or None. Pure, so the test
    can call it directly."""
    if event.get("magixEvent") != "ping":
        return None
    greeting = config.get("greeting", "hello") if isinstance(config, dict) else "hello"
    return "pong", {"greeting": greeting, "to": event.get("from")}


@plugin.on_load
def loaded(config):
    plugin.host.log("@@name@@ loaded")


@plugin.on_magix("ping")
def on_ping(room, event):
    # The config as resolved for this room: the manifest's config, the
    # roomConfig layers that match the room, or a live change.
    answer = reply(event, plugin.config.for_room(room))
    if answer is not None:
        name, payload = answer
        plugin.host.dispatch_magix(room, name, payload)


if __name__ == "__main__":
    plugin.run()
