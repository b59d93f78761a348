extension Scaffold {
    /// A Python plugin: one script on the `roomkit_plugin` SDK
    /// (sdk/python, standard library only), run by the bot as a `command`
    /// plugin over the plugin wire, and a unittest that checks its reply
    /// logic and runs scenario.json in `roombot simulate`. `sdk` is where the
    /// README says the SDK is (a RoomKit checkout's `sdk/python`).
    func python(sdk: String?) -> [String: String] {
        [
            "\(identifier).py": pythonPlugin,
            "test_\(identifier).py": pythonTest,
            "plugins.json": commandManifest(["python3", "\(identifier).py"]),
            "scenario.json": scenario,
            "README.md": pythonReadme(sdk: sdk),
            ".gitignore": "__pycache__/\n",
        ]
    }

    /// The manifest of a `command` plugin (docs/PLUGINS.md, "Plugins in Python").
    func commandManifest(_ command: [String]) -> String {
        let words = command.map { "\"\($0)\"" }.joined(separator: ", ")
        return """
            {
              "manifestVersion": 1,
              "plugins": [
                {
                  "name": "\(name)",
                  "command": [\(words)],
                  "abi": 1,
                  "hooks": ["magix"],
                  "rooms": ["*"],
                  "timeoutMs": 50,
                  "config": {"greeting": "hello"},
                  "roomConfig": {"vip-*": {"greeting": "welcome back"}}
                }
              ]
            }

            """
    }

    private var pythonPlugin: String {
        """
        \"\"\"\(name): a RoomKit plugin in Python (roombot new-plugin \(name) --lang python).

        It answers the magix event "ping" with "pong" {"greeting": <config greeting>,
        "to": <the sender's memberId>}. The bot runs this script as its own process
        (plugins.json, "command") and talks to it over the plugin wire.
        \"\"\"
        from roomkit_plugin import Plugin

        plugin = Plugin()


        def reply(event, config):
            \"\"\"The (name, payload) to answer `event` with, or None. Pure, so the test
            can call it directly.\"\"\"
            if event.get("magixEvent") != "ping":
                return None
            greeting = config.get("greeting", "hello") if isinstance(config, dict) else "hello"
            return "pong", {"greeting": greeting, "to": event.get("from")}


        @plugin.on_load
        def loaded(config):
            plugin.host.log("\(name) loaded")


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

        """
    }

    private var pythonTest: String {
        """
        \"\"\"Tests of \(name): its reply logic, then scenario.json in roombot's simulator.\"\"\"
        import os
        import shutil
        import subprocess
        import unittest

        import \(identifier)

        HERE = os.path.dirname(os.path.abspath(__file__))


        class ReplyTests(unittest.TestCase):
            def test_ping_gets_the_greeting_and_the_sender(self):
                self.assertEqual(\(identifier).reply({"magixEvent": "ping", "from": 7}, {"greeting": "hi"}),
                                 ("pong", {"greeting": "hi", "to": 7}))

            def test_other_events_get_no_answer(self):
                self.assertIsNone(\(identifier).reply({"magixEvent": "chat", "from": 7}, {}))


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

        """
    }

    private func pythonReadme(sdk: String?) -> String {
        let install = sdk.map { "pip install \($0)" } ?? "pip install ROOMKIT/sdk/python"
        let path = sdk ?? "ROOMKIT/sdk/python"
        let checkout = sdk == nil ? "; ROOMKIT below is that checkout" : ""
        return """
            # \(name)

            A RoomKit plugin in Python, made by `roombot new-plugin \(name) --lang python`.
            The bot starts `\(identifier).py` as its own process (`"command"` in
            `plugins.json`) and talks to it over the plugin wire; a crash or a hang
            costs only this plugin's calls, and the bot restarts it.

            It needs Python 3.9 or later and the `roomkit_plugin` package, which is
            standard library only and ships with RoomKit (`sdk/python` in its
            repository\(checkout)):

                \(install)    # or: export PYTHONPATH=\(path)

            ## Build, test and load (two commands)

                python3 -m unittest -v                  # the reply logic, then scenario.json in roombot simulate
                roombot check --manifest plugins.json   # starts it as the bot would and checks its hello

            ## Files

            - `\(identifier).py`: the plugin: decorated handlers on a `Plugin`.
            - `test_\(identifier).py`: its test.
            - `plugins.json`, `scenario.json`: the manifest and the simulator's script.

            An exception in a handler is logged with its traceback in the bot's log
            and counts as one failed call; the plugin keeps serving. `print()` goes
            to the bot's log too (never to the wire). The guide is RoomKit's
            docs/PLUGINS.md, "Plugins in Python".

            \(runSection(plugin: "command"))
            """
    }
}
