"""The decorator surface and dispatch, in-process (no wire)."""
import io
import json
import unittest
from contextlib import redirect_stderr

from roomkit_plugin import HostError, KVFullError, Plugin


class Recorder:
    """A channel that records host calls and answers requests from a table."""

    def __init__(self, answers=None):
        self.calls = []
        self.answers = answers or {}

    def notify(self, method, args):
        self.calls.append((method, args))

    def request(self, method, args):
        self.calls.append((method, args))
        answer = self.answers.get(method)
        return answer(args) if callable(answer) else answer


def magix(payload, name="chat", sender=2):
    return {"room": "lobby", "from": sender, "event": name, "payload": payload, "seq": 9}


class PluginTests(unittest.TestCase):
    def setUp(self):
        self.plugin = Plugin()
        self.channel = Recorder()
        self.plugin._connect(self.channel)

    def quietly(self, fn, *args):
        with redirect_stderr(io.StringIO()) as err:
            result = fn(*args)
        return result, err.getvalue()

    def test_the_issue_example(self):
        plugin = self.plugin

        @plugin.url_interrupter
        def rewrite(url):
            return url + "?via=py"

        @plugin.on_magix
        def on_magix(room, event):
            if event["payload"] == "!py":
                plugin.host.dispatch_magix(room, "reply", {"text": "pong-py"})

        self.assertEqual(plugin._on_url("https://a/b"), "https://a/b?via=py")
        self.assertTrue(plugin._on_room_event(8, "lobby", magix("!py")))
        self.assertTrue(plugin._on_room_event(8, "lobby", magix("other")))
        self.assertEqual(self.channel.calls, [("dispatch_magix", {"room": "lobby", "event": "reply",
                                                                  "payload": '{"text":"pong-py"}'})])
        self.assertEqual(plugin.hooks, ["urlInterrupter", "magix"])

    def test_magix_event_is_the_event_log_dict(self):
        seen = []
        self.plugin.on_magix(lambda room, event: seen.append(event))
        self.plugin._on_room_event(8, "lobby", magix("hi"))
        self.assertEqual(seen, [{"event": "magix", "room": "lobby", "from": 2, "magixEvent": "chat",
                                 "payload": "hi", "seq": 9}])

    def test_magix_filter_by_event_name_and_room_events(self):
        pings, rooms = [], []
        self.plugin.on_magix("ping")(lambda room, event: pings.append(event["magixEvent"]))
        self.plugin.on_room_event(lambda room, event: rooms.append(event["event"]))
        self.plugin._on_room_event(8, "lobby", magix(None, name="ping"))
        self.plugin._on_room_event(8, "lobby", magix(None, name="chat"))
        self.plugin._on_room_event(9, "lobby", {"room": "lobby", "type": "add", "users": ["u"]})
        self.plugin._on_room_event(99, "lobby", {})  # a newer kind: ignored
        self.assertEqual(pings, ["ping"])
        self.assertEqual(rooms, ["magix", "magix", "userUpdate"])
        self.assertEqual(self.plugin.hooks, ["room"])

    def test_an_exception_is_one_failed_call_logged_with_its_traceback(self):
        calls = []

        @self.plugin.on_magix
        def broken(room, event):
            calls.append(event["payload"])
            if event["payload"] == "boom":
                raise KeyError("missing")

        ok, err = self.quietly(self.plugin._on_room_event, 8, "lobby", magix("boom"))
        self.assertFalse(ok)
        self.assertTrue(self.plugin._on_room_event(8, "lobby", magix("fine")))
        self.assertEqual(calls, ["boom", "fine"])
        self.assertEqual(self.plugin.failures, 1)
        (method, args), = self.channel.calls
        self.assertEqual((method, args["level"]), ("log", 3))
        self.assertIn("on_magix handler broken raised", args["message"])
        self.assertIn("Traceback", args["message"])
        self.assertIn("KeyError: 'missing'", args["message"])
        self.assertEqual(self.plugin.last_failure, "on_magix handler broken raised KeyError: 'missing'")
        self.assertEqual(err, "", "logged once, through the host")
        unconnected = Plugin()
        unconnected._channel = None  # the wire is gone: stderr instead
        unconnected.on_magix(broken)
        _, err = self.quietly(unconnected._on_room_event, 8, "lobby", magix("boom"))
        self.assertIn("KeyError: 'missing'", err)

    def test_url_failures(self):
        answers = iter([None, 5])

        @self.plugin.url_interrupter
        def rewrite(url):
            if url == "raise":
                raise ValueError("bad")
            return next(answers)

        self.assertIsNone(self.quietly(self.plugin._on_url, "raise")[0])
        self.assertIsNone(self.plugin._on_url("none"))
        self.assertIsNone(self.plugin._on_url("number"))
        self.assertEqual(self.plugin.failures, 2)  # the exception and the non-str
        with self.assertRaises(ValueError):
            self.plugin.url_interrupter(lambda url: url)
        self.assertIsNone(Plugin()._on_url("x"))

    def test_memory_error_is_not_a_handler_failure(self):
        @self.plugin.on_magix
        def greedy(room, event):
            raise MemoryError()

        with self.assertRaises(MemoryError):
            self.plugin._on_room_event(8, "lobby", magix("x"))

    def test_config_changes_update_plugin_config_then_call_handlers(self):
        seen = []
        self.plugin._on_load({"greeting": "hello"}, {"vip-*": {"greeting": "welcome back"}})
        self.plugin.on_config_changed(lambda room, config: seen.append((room, dict(self.plugin.config), config)))
        self.plugin._on_config_changed(None, {"greeting": "hi"})
        self.plugin._on_config_changed("vip-1", {"greeting": "pushed"})
        self.assertEqual(seen, [(None, {"greeting": "hi"}, {"greeting": "hi"}),
                                ("vip-1", {"greeting": "hi"}, {"greeting": "pushed"})])
        self.assertEqual(self.plugin.config.for_room("vip-1"), {"greeting": "pushed"})
        # A live change may have changed the layers too: other rooms are asked.
        self.channel.answers["config_get"] = lambda args: {"greeting": "asked for " + args["room"]}
        self.assertEqual(self.plugin.config.for_room("vip-2"), {"greeting": "asked for vip-2"})

    def test_load_failure_and_unload(self):
        order = []
        self.plugin.on_load(lambda config: order.append(("load", config)))
        self.plugin.on_unload(lambda: order.append("unload"))
        self.plugin.host.set_timer(1000, lambda: None)
        self.assertEqual(self.plugin._on_load({"a": 1}, None), (0, ""))
        self.plugin._on_unload()
        self.assertEqual(order, [("load", {"a": 1}), "unload"])
        self.assertEqual(len(self.plugin._timers), 0)

        refusing = Plugin()
        refusing._connect(Recorder())

        @refusing.on_load
        def check(config):
            raise ValueError("config.greeting missing")

        result, why = self.quietly(refusing._on_load, {}, None)[0]
        self.assertEqual(result, -1)
        self.assertIn("check", why)
        coded = Plugin()
        coded._connect(Recorder())
        coded.on_load(lambda config: 3)
        self.assertEqual(coded._on_load({}, None)[0], 3)

    def test_state_hand_off(self):
        self.assertEqual(self.plugin._on_export_state(), (True, None))
        self.assertEqual(self.plugin._on_import_state("{}"), -100)
        got = []
        self.plugin.export_state(lambda: json.dumps({"n": 3}))
        self.plugin.import_state(lambda text: got.append(json.loads(text)))
        self.assertEqual(self.plugin._on_export_state(), (True, '{"n": 3}'))
        self.assertEqual(self.plugin._on_import_state('{"n": 3}'), 0)
        self.assertEqual(got, [{"n": 3}])
        self.plugin.import_state(lambda text: False)
        self.assertEqual(self.plugin._on_import_state("{}"), -1)
        self.plugin.import_state(lambda text: 5)
        self.assertEqual(self.plugin._on_import_state("{}"), 5)
        self.plugin.export_state(lambda: {"not": "a str"})
        self.assertEqual(self.plugin._on_export_state(), (False, None))

    def test_host_calls_encode_json_arguments(self):
        host = self.plugin.host
        host.log("hello", "warning")
        host.dispatch_magix("lobby", "e", "text", to=3)
        host.set_global_state("lobby", {"k": [1]})
        host.put_scenes("lobby", "/d", [{"name": "s"}], index=2)
        host.publish_stream("lobby", "cam")
        host.switch_room("a", "b")
        self.assertEqual(self.channel.calls, [
            ("log", {"level": 2, "message": "hello"}),
            ("dispatch_magix", {"room": "lobby", "event": "e", "payload": '"text"', "to": "3"}),
            ("set_global_state", {"room": "lobby", "patch": '{"k":[1]}'}),
            ("put_scenes", {"room": "lobby", "dir": "/d", "scenes": '[{"name":"s"}]', "index": 2}),
            ("publish_stream", {"room": "lobby", "stream": "cam", "extra": None}),
            ("switch_room", {"from": "a", "to": "b"}),
        ])
        with self.assertRaises(ValueError):
            host.log("x", "loud")

    def test_kv(self):
        store = {}

        def kv_set(args):
            if len(args["value"]) > 10:
                return -2
            store[args["key"]] = args["value"]
            return 0

        self.channel.answers = {
            "kv_get": lambda args: store.get(args["key"]),
            "kv_set": kv_set,
            "kv_delete": lambda args: 1 if store.pop(args["key"], None) is not None else 0,
            "kv_scan": lambda args: {k: v for k, v in store.items() if k.startswith(args["prefix"])},
        }
        kv = self.plugin.host.kv
        kv["a"] = "1"
        kv["ab"] = "2"
        self.assertEqual(kv["a"], "1")
        self.assertIn("ab", kv)
        self.assertEqual(kv.scan("a"), {"a": "1", "ab": "2"})
        with self.assertRaises(KVFullError):
            kv["big"] = "x" * 11
        self.assertNotIn("big", kv)
        del kv["a"]
        with self.assertRaises(KeyError):
            kv["a"]
        with self.assertRaises(KeyError):
            del kv["a"]
        self.assertFalse(kv.delete("a"))
        self.assertEqual(kv.get("a", "default"), "default")
        with self.assertRaises(TypeError):
            kv["n"] = 5
        self.assertTrue(issubclass(KVFullError, HostError))

    def test_standard_logging_goes_to_the_bots_log(self):
        self.plugin.name = "logging-test"
        self.plugin.log.info("joined %s", "lobby")
        self.plugin.log.debug("detail")
        try:
            raise ValueError("bad value")
        except ValueError:
            self.plugin.log.exception("handling failed")
        calls = self.channel.calls
        self.assertEqual(calls[0], ("log", {"level": 1, "message": "joined lobby"}))
        self.assertEqual(calls[1], ("log", {"level": 0, "message": "detail"}))
        self.assertEqual(calls[2][1]["level"], 3)
        self.assertIn("handling failed", calls[2][1]["message"])
        self.assertIn("ValueError: bad value", calls[2][1]["message"])

    def test_calls_before_run_wait_for_the_connection(self):
        plugin = Plugin()
        plugin.host.log("early")
        with self.assertRaises(RuntimeError):
            plugin.host.kv.get("k")
        channel = Recorder()
        plugin._connect(channel)
        self.assertEqual(channel.calls, [("log", {"level": 1, "message": "early"})])


if __name__ == "__main__":
    unittest.main()
