"""The wire conformance plugin in Python (Tests/RoomKitPluginTests/WireConformanceTests.swift
runs it next to the C one; its doc comment fixes the behaviour):

- load(config): log "loaded <config as compact JSON>"; result 3 when the config has "failLoad";
- urlInterrupter(url): a failure when url contains "fail", else url + "?via=conformance";
- magix: dispatch_magix(room, "echo", <the payload as the bot sent it>, None); when the magix
  payload is "fail", the handler raises instead (the SDK sends FAILED for that record);
- other room events: log "room <kind> <room>";
- player events: kv_get(room) (waits for the reply), then log "kv=<value or null>";
- throwError: log (warning) "error <domain> <code> <message>";
- configChanged: log "config <room or null> <config as compact JSON>";
- exportState: the last imported state or None; importState: 5 for "refuse", else keep it;
- unload: log "unloading".
"""
import json

from roomkit_plugin import Plugin
from roomkit_plugin.events import ROOM_EVENT_KINDS

plugin = Plugin()
kept = {"state": None}


def compact(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@plugin.on_load
def loaded(config):
    plugin.host.log("loaded " + compact(config))
    return 3 if isinstance(config, dict) and "failLoad" in config else 0


@plugin.url_interrupter
def rewrite(url):
    return None if "fail" in url else url + "?via=conformance"


@plugin.on_room_event
def room_event(room, event):
    if event["event"] == "magix" and event.get("payload") == "fail":
        raise RuntimeError("conformance failure")
    if event["event"] == "magix":
        payload = {k: v for k, v in event.items() if k not in ("event", "magixEvent")}
        payload["event"] = event["magixEvent"]  # the bot's payload: the log dict without the log's renaming
        plugin.host.dispatch_magix(room, "echo", payload)
    else:
        plugin.host.log("room %d %s" % (ROOM_EVENT_KINDS[event["event"]], room))


@plugin.on_player_event
def player_event(room, event):
    value = plugin.host.kv.get(room)
    plugin.host.log("kv=" + ("null" if value is None else value))


@plugin.on_throw_error
def throw_error(domain, code, message):
    plugin.host.log("error %s %d %s" % (domain, code, message), "warning")


@plugin.on_config_changed
def config_changed(room, config):
    plugin.host.log("config %s %s" % ("null" if room is None else room, compact(config)))


@plugin.export_state
def export():
    return kept["state"]


@plugin.import_state
def restore(state):
    if state == "refuse":
        return 5
    kept["state"] = state
    return 0


@plugin.on_unload
def unloading():
    plugin.host.log("unloading")


if __name__ == "__main__":
    plugin.run()
