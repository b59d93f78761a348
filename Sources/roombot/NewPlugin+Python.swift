extension Scaffold {
    /// A Python plugin: one script on the `roomkit_plugin` SDK
    /// (sdk/python, standard library only), run by the bot as a `command`
    /// plugin over the plugin wire, and a unittest that checks its reply
    /// logic and runs scenario.json in `roombot simulate`. `sdk` is where the
    /// README says the SDK is (a RoomKit checkout's `sdk/python`). The
    /// Python and Markdown are files (`Templates/python/`, resources of
    /// roombot, like the Rust ones) with `@@name@@`, `@@identifier@@`,
    /// `@@install@@`, `@@sdkPath@@`, `@@checkout@@` and `@@runSection@@`
    /// filled in here.
    func python(sdk: String?) throws -> [String: String] {
        let install = sdk.map { "pip install \($0)" } ?? "pip install ROOMKIT/sdk/python"
        let fill = { (template: String) in
            template
                .replacingOccurrences(of: "@@runSection@@\n", with: self.runSection(plugin: "command"))
                .replacingOccurrences(of: "@@install@@", with: install)
                .replacingOccurrences(of: "@@sdkPath@@", with: sdk ?? "ROOMKIT/sdk/python")
                .replacingOccurrences(of: "@@checkout@@", with: sdk == nil ? "; ROOMKIT below is that checkout" : "")
                .replacingOccurrences(of: "@@name@@", with: self.name)
                .replacingOccurrences(of: "@@identifier@@", with: self.identifier)
        }
        return [
            "\(identifier).py": fill(try Self.template("python/plugin.py")),
            "test_\(identifier).py": fill(try Self.template("python/test_plugin.py")),
            "plugins.json": commandManifest(["python3", "\(identifier).py"]),
            "scenario.json": scenario,
            "README.md": fill(try Self.template("python/README.md")),
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
}
