"""Tests of @@name@@: its reply logic, then scenario.json in roombot's simulator."""
import os
import shutil
import subprocess
import unittest

import @@identifier@@

HERE = os.path.dirname(os.path.abspath(__file__))


class ReplyTests(unittest.TestCase):
    def test_ping_gets_the_greeting_and_the_sender(self):
        self.assertEqual(@@identifier@@.reply({"magixEvent": "ping", "from": 7}, {"greeting": "hi"}),
                         ("pong", {"greeting": "hi", "to": 7}))

    def test_other_events_get_no_answer(self):
        self.assertIsNone(@@identifier@@.reply({"magixEvent": "chat", "from": 7}, {}))


class SimulatorTests(unittest.TestCase):
    def test_scenario_holds_in_the_simulator(self):
        # The plugin as the bot runs it (its own process, over the wire),
        # against scripted rooms in virtual time.
        roombot = os.environ.get("ROOMBOT") or shutil.which("roombot")
        self.assertIsNotNone(roombot, "roombot on PATH (make install of RoomKit), or ROOMBOT=/path/to/roombot")
        done = subprocess.run([roombot, "simulate", "--manifest", "plugins.json", "--script", "scenario.json"],
                              cwd=HERE, capture_output=True, text=True, timeout=300)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)


if __name__ == "__main__":
    unittest.main()
