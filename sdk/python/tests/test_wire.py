"""The SDK over the real wire: a child process per test, a bot's side in fakebot.py."""
import json
import os
import struct
import subprocess
import sys
import time
import unittest

from tests.fakebot import (ANSWER, CALL, DONE, EVENTS, FAILED, HELLO, LOADED, LOG, PONG, SDK, UNLOADED, FakeBot,
                           events, frame, record)

PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plugins", "probe.py")
NOOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plugins", "noop.py")


def chat(seq, payload, room="lobby", sender=2, name="chat"):
    body = json.dumps({"room": room, "from": sender, "event": name, "payload": payload, "seq": seq})
    return record(1, seq, 8, room, body)


class WireTests(unittest.TestCase):
    def start(self, script=PROBE, config='{"greeting":"hello"}', timeout_ms=50, room_config=None, **kwargs):
        self.bot = FakeBot(script, **kwargs)
        self.addCleanup(self.bot.close)
        return self.bot.handshake(config, timeout_ms, room_config)

    def until_done(self, seq, timeout=5.0):
        """Frames up to the DONE that reaches seq (DONE itself excluded)."""
        got = []
        while True:
            frame_ = self.bot.next(timeout)
            if frame_.kind == DONE:
                if frame_.value >= seq:
                    return got
                continue
            got.append(frame_)

    def test_hello_declares_version_abi_and_the_hooks_it_serves(self):
        hello = self.start()
        self.assertEqual((hello.version, hello.flags, hello.abi_major, hello.abi_minor, hello.message),
                         (1, 0, 1, 1, ""))
        # urlInterrupter 1 + throwError 2 + room 4 + configChanged 16 + export 32 + import 64
        self.assertEqual(hello.hooks, 119)
        self.assertEqual(self.bot.logs, ['probe loaded with {"greeting": "hello"}'])
        bot = FakeBot(NOOP)
        self.addCleanup(bot.close)
        self.assertEqual(bot.handshake().hooks, 4 | 16)

    def test_version_mismatch_says_both_sides_and_exits_0(self):
        bot = FakeBot(PROBE, versions="2,3")
        hello = bot.expect(HELLO)
        self.assertEqual((hello.version, hello.stage), (0, 7))
        self.assertEqual(hello.message, "wire versions offered 2,3, this plugin speaks 1")
        code, _, _ = bot.close()
        self.assertEqual(code, 0)

    def test_started_by_hand_explains_and_exits_64(self):
        env = dict(os.environ, PYTHONPATH=SDK)
        env.pop("ROOMKIT_WIRE_FD", None)
        done = subprocess.run([sys.executable, PROBE], env=env, capture_output=True, text=True, timeout=10)
        self.assertEqual(done.returncode, 64)
        self.assertIn("is a RoomKit plugin", done.stderr)
        self.assertIn('"command": ["python3", "probe.py"]', done.stderr)

    def test_magix_reaches_the_handler_as_the_event_log_shows_it(self):
        self.start()
        self.bot.send(events([chat(1, "!echo")]))
        call, = self.until_done(1)
        self.assertEqual((call.kind, call.request, call.function, call.number), (CALL, 0, 1, 0))
        room, name, payload, to = call.args
        self.assertEqual((room, name, to), ("lobby", "echo", None))
        self.assertEqual(json.loads(payload), {"event": "magix", "room": "lobby", "from": 2, "magixEvent": "chat",
                                               "payload": "!echo", "seq": 1})

    def test_frames_split_anywhere_and_many_per_read(self):
        self.start()
        data = events([chat(1, "!echo")]) + events([chat(2, "x"), chat(3, "!echo")])
        for i in range(len(data)):
            self.bot.send(data[i:i + 1])
        calls = self.until_done(3)
        self.assertEqual([c.args[1] for c in calls], ["echo", "echo"])

    def test_a_handler_exception_is_logged_with_its_traceback_and_the_plugin_keeps_serving(self):
        self.start()
        self.bot.send(events([chat(1, "!raise"), chat(2, "!echo")]))
        got = self.until_done(2)
        self.assertEqual([f.kind for f in got], [FAILED, CALL])
        log = "\n".join(self.bot.logs)
        self.assertIn("on_magix handler on_magix raised", log)
        self.assertIn("Traceback (most recent call last)", log)
        self.assertIn("RuntimeError: boom from a handler", log)
        code, _, _ = self.bot.close()
        self.assertEqual(code, 0)

    def test_failed_names_the_record_whose_handler_raised(self):
        self.start()
        self.bot.send(events([chat(1, "x"), chat(2, "!raise"), chat(3, "!echo")]))
        got = self.until_done(3)
        self.assertEqual([f.name for f in got], ["FAILED", "CALL"])
        self.assertEqual(got[0].seq, 2)
        self.assertEqual(got[0].reason, "on_magix handler on_magix raised RuntimeError: boom from a handler")

    def test_url_answers_and_failures(self):
        self.start()
        for request, url, result, text in [(1, "https://a/x.png", 0, "https://a/x.png?via=py"),
                                           (2, "https://raise", -1, None),
                                           (3, "https://none", -1, None),
                                           (4, "https://number", -1, None)]:
            self.bot.url(request, url)
            answer = self.bot.expect(ANSWER)
            self.assertEqual((answer.request, answer.result, answer.text), (request, result, text))

    def test_url_and_ping_jump_the_queue_of_records(self):
        self.start()
        # A slow first record, then many; the URL and the PING arrive while the first runs.
        self.bot.send(events([chat(1, "!slow")] + [chat(n, "x") for n in range(2, 2002)]))
        time.sleep(0.05)
        self.bot.url(9, "https://jump")
        self.bot.ping(77)
        got = self.until_done(2001)
        kinds = [f.kind for f in got]
        self.assertIn(ANSWER, kinds)
        self.assertIn(PONG, kinds)
        self.assertEqual(got[kinds.index(PONG)].value, 77)

    def test_done_is_sent_mid_frame_when_a_call_budget_has_passed(self):
        self.start(timeout_ms=50)
        self.bot.send(events([chat(1, "!slow"), chat(2, "!slow"), chat(3, "x")]))
        dones = []
        while not dones or dones[-1] < 3:
            got = self.bot.next()
            if got.kind == DONE:
                dones.append(got.value)
        self.assertGreater(len(dones), 1, dones)
        self.assertEqual(dones, sorted(dones))

    def test_ping_when_idle(self):
        self.start()
        self.bot.ping(5)
        self.assertEqual(self.bot.expect(PONG).value, 5)

    def test_host_calls_that_answer(self):
        self.start()
        self.bot.send(events([chat(1, "!kv greeted:u1 yes")]))
        kv_set = self.bot.expect(CALL)
        self.assertEqual((kv_set.function, kv_set.args), (16, ["greeted:u1", "yes"]))
        self.assertNotEqual(kv_set.request, 0)
        self.bot.reply(kv_set.request, 0)
        kv_get = self.bot.expect(CALL)
        self.assertEqual((kv_get.function, kv_get.args), (15, ["greeted:u1"]))
        self.bot.reply(kv_get.request, 0, "yes")
        scan = self.bot.expect(CALL)
        self.assertEqual((scan.function, scan.args), (18, ["g"]))
        self.bot.reply(scan.request, 0, '{"greeted:u1":"yes"}')
        answer, = self.until_done(1)
        self.assertEqual(json.loads(answer.args[2]), {"value": "yes", "scan": {"greeted:u1": "yes"}})

    def test_frames_that_arrive_while_waiting_for_a_reply_are_served_after(self):
        self.start()
        self.bot.send(events([chat(1, "!members")]))
        members = self.bot.expect(CALL)
        self.assertEqual((members.function, members.args), (13, ["lobby"]))
        self.bot.send(events([chat(2, "!echo")]))
        self.bot.url(3, "https://u")
        self.bot.reply(members.request, 0, '[{"memberId":1,"userId":"bot-1"}]')
        got = self.until_done(2)
        self.assertEqual([f.name for f in got], ["CALL", "ANSWER", "CALL"])
        self.assertEqual(json.loads(got[0].args[2]), [{"memberId": 1, "userId": "bot-1"}])
        self.assertEqual(got[2].args[1], "echo")

    def test_kv_full_is_a_handler_failure(self):
        self.start()
        self.bot.send(events([chat(1, "!kv k toolong")]))
        kv_set = self.bot.expect(CALL)
        self.bot.reply(kv_set.request, -2)
        failed = self.until_done(1)
        self.assertEqual([f.name for f in failed], ["FAILED"])
        self.assertIn("KVFullError", failed[0].reason)
        self.assertIn("KVFullError", "\n".join(self.bot.logs))

    def test_timers_run_between_records(self):
        self.start()
        self.bot.send(events([chat(1, "!timer")]))
        self.until_done(1)
        fired = self.bot.expect(CALL)
        self.assertEqual(fired.args[1:3], ["timer", '"fired"'])

    def test_load_with_room_config_resolves_rooms_without_asking_the_bot(self):
        self.start(config='{"greeting":"hello","n":1}', room_config='{"vip-*":{"greeting":"welcome back"},"*":{"n":2}}')
        self.bot.send(events([chat(1, "!config", room="vip-1"), chat(2, "!config", room="lobby")]))
        calls = self.until_done(2)
        self.assertEqual([c.function for c in calls], [1, 1], "no config_get round trip")
        self.assertEqual([json.loads(c.args[2]) for c in calls],
                         [{"greeting": "welcome back", "n": 2}, {"greeting": "hello", "n": 2}])

    def test_config_throw_error_and_room_records(self):
        self.start(config='{"greeting":"hello"}')
        self.bot.logs.clear()
        self.bot.send(events([
            record(4, 1, 0, None, '{"greeting":"hi"}'),
            record(4, 2, 0, "vip-1", '{"greeting":"vip"}'),
            record(3, 3, 1009003, "dispatch_magix", "read-only session"),
            record(1, 4, 9, "lobby", '{"room":"lobby","type":"add","users":["alice"]}'),
            chat(5, "!config", room="vip-1"),
            chat(6, "!config", room="lobby"),
            chat(7, "!config", room="lobby"),
        ]))
        vip = self.bot.expect(CALL)
        fetch = self.bot.expect(CALL)
        self.assertEqual((fetch.function, fetch.args), (14, ["lobby"]))
        self.bot.reply(fetch.request, 0, '{"greeting":"hi","lobby":true}')
        calls = [vip] + self.until_done(7)
        self.assertEqual(self.bot.logs, ['config None {"greeting": "hi"}', 'config vip-1 {"greeting": "vip"}',
                                         "error dispatch_magix 1009003 read-only session", "users alice"])
        # vip-1 as pushed; lobby asked once (config_get), then kept
        self.assertEqual([json.loads(c.args[2]) for c in calls],
                         [{"greeting": "vip"}, {"greeting": "hi", "lobby": True}, {"greeting": "hi", "lobby": True}])

    def test_state_export_and_import(self):
        self.start()
        self.bot.send(events([chat(1, "x"), chat(2, "y")]))
        self.until_done(2)
        self.bot.export_state(3)
        answer = self.bot.expect(ANSWER)
        self.assertEqual((answer.request, answer.result, json.loads(answer.text)), (3, 0, {"count": 2}))
        self.bot.import_state(4, "refuse")
        self.assertEqual(self.bot.expect(ANSWER).result, -1)
        self.bot.import_state(5, '{"count":2}')
        answer = self.bot.expect(ANSWER)
        self.assertEqual((answer.request, answer.result, answer.text), (5, 0, None))
        noop = FakeBot(NOOP)
        self.addCleanup(noop.close)
        noop.handshake()
        noop.export_state(1)
        self.assertEqual(noop.expect(ANSWER).text, None)
        noop.import_state(2, "{}")
        self.assertEqual(noop.expect(ANSWER).result, -100)

    def test_unload_runs_the_hook_answers_and_exits_0(self):
        self.start()
        self.bot.send(events([chat(1, "x")]))
        self.bot.unload()
        self.until_done(1)
        self.bot.expect(UNLOADED)
        self.assertEqual(self.bot.logs[-1], "unloading after 1")
        self.assertEqual(self.bot.process.wait(5), 0)

    def test_end_of_file_exits_at_once(self):
        self.start()
        started = time.monotonic()
        code, _, _ = self.bot.close()
        self.assertEqual(code, 0)
        self.assertLess(time.monotonic() - started, 5)

    def test_exiting_in_a_handler_is_an_exit_not_a_failure(self):
        self.start()
        self.bot.send(events([chat(1, "!exit")]))
        self.assertEqual(self.bot.process.wait(5), 3)

    def test_print_goes_to_stdout_never_the_wire(self):
        self.start()
        self.bot.send(events([chat(1, "!print"), chat(2, "!echo")]))
        got = self.until_done(2)
        self.assertEqual([f.kind for f in got], [CALL])
        _, out, _ = self.bot.close()
        self.assertIn("PRINTED-MARKER", out)

    def test_progress_page_names_the_running_record_and_the_last_finished(self):
        hello = self.start(page=True)
        self.assertEqual(hello.flags, 1, "HELLO says it keeps the page")
        self.bot.send(events([chat(1, "x"), chat(2, "x"), chat(3, "!slow"), chat(4, "x")]))
        deadline = time.monotonic() + 5
        while self.bot.progress()["busy_seq"] != 3 and time.monotonic() < deadline:
            time.sleep(0.005)
        during = self.bot.progress()
        self.assertEqual((during["busy_seq"], during["busy_what"], during["done_seq"]), (3, 1, 2))
        self.assertGreater(during["busy_since_ns"], 0)
        self.until_done(4)
        self.assertEqual(self.bot.progress(), {"busy_seq": 0, "busy_since_ns": 0, "done_seq": 4, "busy_what": 0,
                                               "crash_errno": 0})

    def test_with_the_page_a_crash_leaves_exactly_what_was_finished(self):
        self.start(page=True)
        self.bot.send(events([chat(1, "x"), chat(2, "x"), chat(3, "!segv"), chat(4, "x")]))
        self.assertEqual(self.bot.process.wait(10), -11)
        page = self.bot.progress()
        self.assertEqual((page["busy_seq"], page["busy_what"], page["done_seq"]), (3, 1, 2))

    def test_out_of_memory_exits_70_and_says_so_on_the_page(self):
        import resource
        self.start(page=True)
        resource.prlimit(self.bot.process.pid, resource.RLIMIT_AS, (256 << 20, 256 << 20))
        self.bot.send(events([chat(1, "x"), chat(2, "!oom")]))
        self.assertEqual(self.bot.process.wait(30), 70)
        page = self.bot.progress()
        self.assertEqual((page["crash_errno"], page["busy_seq"], page["busy_what"], page["done_seq"]), (12, 2, 1, 1))

    def test_sys_exit_in_a_handler_leaves_the_page_naming_the_record(self):
        self.start(page=True)
        self.bot.send(events([chat(1, "x"), chat(2, "!exit")]))
        self.assertEqual(self.bot.process.wait(10), 3)
        page = self.bot.progress()
        self.assertEqual((page["busy_seq"], page["busy_what"], page["done_seq"]), (2, 1, 1))

    def test_bad_frames_exit_71(self):
        for junk in [frame(99, b"x"), struct.pack("<IB", 0, 2), frame(EVENTS, struct.pack("<I", 2)),
                     frame(11, b"\x01"), events([record(1, 1, 8, "lobby", "{not json")]),
                     events([record(9, 1, 0, "lobby", "{}")])]:
            bot = FakeBot(PROBE)
            bot.handshake()
            bot.send(junk)
            code, _, err = bot.close()
            self.assertEqual(code, 71, junk)
            self.assertIn("bad frame from the bot", err)


if __name__ == "__main__":
    unittest.main()
