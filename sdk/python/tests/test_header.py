"""The SDK's wire constants are the ones roomkit-plugin-host and the bot are
built with (Sources/CRoomKitPluginWire/include/roomkit_plugin_wire.h): the
two sides of the wire cannot drift apart unnoticed."""
import os
import re
import unittest

from roomkit_plugin import frames, progress

HEADER = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
                      "Sources", "CRoomKitPluginWire", "include", "roomkit_plugin_wire.h")


def header_values():
    text = open(HEADER).read()
    values = {}
    for name, value in re.findall(r"#define (ROOMKIT_WIRE_[A-Z0-9_]+) \(?(-?(?:0x[0-9A-Fa-f]+|\d+))u?\)?", text):
        values[name[len("ROOMKIT_WIRE_"):]] = int(value, 0)
    for name, value in re.findall(r"\b(ROOMKIT_WIRE_[A-Z0-9_]+) = (\d+),", text):
        values[name[len("ROOMKIT_WIRE_"):]] = int(value)
    return values


@unittest.skipUnless(os.path.exists(HEADER), "not in a RoomKit checkout")
class HeaderTests(unittest.TestCase):
    def test_frame_types_hooks_stages_and_limits_match_the_c_header(self):
        c = header_values()
        ours = {
            "VERSION": frames.WIRE_VERSION, "NULL": frames.NULL, "MAX_FRAME": frames.MAX_FRAME,
            "LOAD": frames.LOAD, "EVENTS": frames.EVENTS, "URL": frames.URL, "REPLY": frames.REPLY,
            "UNLOAD": frames.UNLOAD, "EXPORT_STATE": frames.EXPORT_STATE, "IMPORT_STATE": frames.IMPORT_STATE,
            "PING": frames.PING, "HELLO": frames.HELLO, "LOADED": frames.LOADED, "ANSWER": frames.ANSWER,
            "LOG": frames.LOG, "CALL": frames.CALL, "UNLOADED": frames.UNLOADED, "DONE": frames.DONE,
            "PONG": frames.PONG, "NO_IMPORT": frames.NO_IMPORT, "STAGE_OK": frames.STAGE_OK,
            "STAGE_SETUP": frames.STAGE_SETUP, "STAGE_VERSION": frames.STAGE_NO_VERSION,
            "HOOK_URL": frames.HOOK_URL, "HOOK_THROW_ERROR": frames.HOOK_THROW_ERROR, "HOOK_ROOM": frames.HOOK_ROOM,
            "HOOK_PLAYER": frames.HOOK_PLAYER, "HOOK_CONFIG_CHANGED": frames.HOOK_CONFIG_CHANGED,
            "HOOK_EXPORT_STATE": frames.HOOK_EXPORT, "HOOK_IMPORT_STATE": frames.HOOK_IMPORT,
            "FLAG_PROGRESS_PAGE": progress.FLAG_PROGRESS_PAGE, "IDLE": progress.BUSY_IDLE,
            "BUSY_EVENT": progress.BUSY_EVENT, "BUSY_URL": progress.BUSY_URL, "BUSY_LOAD": progress.BUSY_LOAD,
            "BUSY_UNLOAD": progress.BUSY_UNLOAD, "BUSY_TIMER": progress.BUSY_TIMER,
        }
        for name, value in ours.items():
            self.assertIn(name, c, "ROOMKIT_WIRE_%s is not in the header any more" % name)
            self.assertEqual(value, c[name], "ROOMKIT_WIRE_%s" % name)
        if "FAILED" in c:
            self.assertEqual(frames.FAILED, c["FAILED"])

    def test_host_call_numbers_match_the_c_header(self):
        c = header_values()
        for name, (number, _) in frames.FUNCTIONS.items():
            key = {"room_state": "ROOM_STATE", "room_members": "ROOM_MEMBERS", "config_get": "CONFIG_GET",
                   "kv_scan": "KV_SCAN"}.get(name, name.upper())
            self.assertEqual(number, c.get(key), "ROOMKIT_WIRE_%s" % key)


if __name__ == "__main__":
    unittest.main()
