import Foundation
import RoomKitCLI

extension Scaffold {
    /// A Rust plugin: a cdylib crate with the `extern "C"` descriptor written
    /// by hand (no bindgen, no dependencies, so it builds offline), and a
    /// `cargo test` that drives it through a fake host table. The Rust,
    /// TOML and Markdown are files (`Templates/rust/`, resources of roombot)
    /// with `@@name@@`, `@@identifier@@` and `@@runSection@@` filled in here.
    var rust: [String: String] {
        get throws {
            var files: [String: String] = [
                "plugins.json": manifest(library: "target/release/lib\(identifier).so"),
                "scenario.json": scenario,
                ".gitignore": "target/\nCargo.lock\n",
            ]
            for path in ["Cargo.toml", "src/lib.rs", "src/abi.rs", "src/json.rs", "tests/simulate.rs", "README.md"] {
                files[path] = try Self.template("rust/" + path)
                    .replacingOccurrences(of: "@@runSection@@\n", with: runSection)
                    .replacingOccurrences(of: "@@name@@", with: name)
                    .replacingOccurrences(of: "@@identifier@@", with: identifier)
            }
            return files
        }
    }

    /// The text of `Templates/<path>`, a resource of roombot (installed
    /// beside the binary as `RoomKit_roombot.resources`); a missing one is a
    /// broken install, said with its path.
    static func template(_ path: String) throws -> String {
        guard let directory = Bundle.module.url(forResource: "Templates", withExtension: nil) else {
            throw UsageProblems(lines: ["--lang: the scaffold templates are missing beside roombot (\(Bundle.module.bundlePath))"])
        }
        let file = directory.appendingPathComponent(path)
        do {
            return try String(contentsOf: file, encoding: .utf8)
        } catch {
            throw UsageProblems(lines: ["--lang: cannot read the template \(file.path): \(error.localizedDescription)"])
        }
    }
}
