// The server's full scene tree; `sceneState` is the part clients see.

/// All scenes of a room, by directory, and the current scene.
///
/// Clients see only ``sceneState`` (the current directory's scenes); the
/// server keeps the whole tree so that `setScenePath` can move anywhere.
///
/// Invariants (kept by every mutation; violations are 1009006 and leave the
/// tree unchanged):
/// - every directory in ``directories`` has at least one scene, with unique names;
/// - a path is never both a scene and a directory (`putScenes` into a
///   scene's path, or of a scene named like an existing directory, is refused);
/// - ``scenePath`` always names an existing scene.
///
/// Removal fallback (PROTOCOL.md is silent): when `removeScenes` removes the
/// current scene, the current scene becomes the first scene of its
/// directory; if that directory is gone, the first scene of the nearest
/// ancestor directory that has scenes; failing that, the first scene of the
/// directory whose path sorts first; and if the tree is empty, a fresh root
/// scene `/init` is created, as in a new room.
public struct SceneTree: Sendable, Hashable {
    /// Scenes per directory path (`/`, `/lesson`, ...), in order.
    public private(set) var directories: [String: [Scene]]
    /// The current scene's path.
    public private(set) var scenePath: String

    /// A new room's tree: the single scene `/init`.
    public init() {
        directories = [ScenePath.root: [Scene(name: "init")]]
        scenePath = "/init"
    }

    /// A tree holding just the directory of `sceneState` (after a `setState`
    /// patch replaced `sceneState` whole). Throws 1009006 if it is invalid.
    public init(sceneState: SceneState) throws(ProtocolError) {
        let checked = try SceneState(json: sceneState.json)
        guard let (directory, _) = ScenePath.split(checked.scenePath) else {
            throw .invalidArgument("bad scene path")
        }
        directories = [directory: checked.scenes]
        scenePath = checked.scenePath
    }

    // MARK: Queries

    /// The scenes directly in `directory` (empty if none).
    public func scenes(in directory: String) -> [Scene] {
        directories[directory] ?? []
    }

    /// Whether `path` names an existing scene.
    public func containsScene(_ path: String) -> Bool {
        guard let (directory, name) = ScenePath.split(path) else { return false }
        return directories[directory]?.contains { $0.name == name } ?? false
    }

    /// Whether `path` is an existing directory: one that holds scenes, or
    /// lies above a directory that does. `/` is a directory while any scene exists.
    public func containsDirectory(_ path: String) -> Bool {
        directories.keys.contains { ScenePath.isWithin($0, directory: path) }
    }

    /// The current scene.
    public var currentScene: Scene {
        let state = sceneState
        return state.scenes.indices.contains(state.index) ? state.scenes[state.index] : Scene(name: "init")
    }

    /// What clients see: the scenes of the current directory and the index
    /// of the current scene in them.
    public var sceneState: SceneState {
        guard let (directory, name) = ScenePath.split(scenePath) else {
            return RoomState.initial.sceneState
        }
        let scenes = directories[directory] ?? []
        let index = scenes.firstIndex { $0.name == name } ?? 0
        return SceneState(scenePath: scenePath, scenes: scenes, index: index)
    }

    // MARK: Mutations

    /// Puts `scenes` into `dir` (`putScenes`). A scene whose name already
    /// exists in `dir` replaces that scene in place; the others are inserted
    /// in order at `index` (clamped to the end), or appended when `index` is nil.
    /// The current scene keeps its path (and is the replacement if replaced).
    ///
    /// Throws 1009006 for an invalid directory path, an empty list, invalid
    /// or repeated names, a negative index, or a path conflict (see the type's
    /// invariants).
    public mutating func putScenes(dir: String, scenes: [Scene], index: Int?) throws(ProtocolError) {
        guard ScenePath.isValidDirectory(dir) else { throw .invalidArgument("dir is not a valid directory path") }
        guard !scenes.isEmpty else { throw .invalidArgument("scenes must not be empty") }
        if let index, index < 0 { throw .invalidArgument("index must not be negative") }
        for path in [dir] + ScenePath.ancestors(of: dir) where containsScene(path) {
            throw .invalidArgument("dir lies inside a scene")
        }
        var names: Set<String> = []
        for scene in scenes {
            guard ScenePath.isValidName(scene.name) else { throw .invalidArgument("bad scene name") }
            guard names.insert(scene.name).inserted else { throw .invalidArgument("scenes repeat a name") }
            let path = ScenePath.join(dir, scene.name)
            guard ScenePath.isValidScene(path) else { throw .invalidArgument("scene path too long") }
            guard !containsDirectory(path) else { throw .invalidArgument("a scene may not replace a directory") }
        }
        var list = directories[dir] ?? []
        var inserted: [Scene] = []
        for scene in scenes {
            if let existing = list.firstIndex(where: { $0.name == scene.name }) {
                list[existing] = scene
            } else {
                inserted.append(scene)
            }
        }
        let position = min(index ?? list.count, list.count)
        list.insert(contentsOf: inserted, at: position)
        directories[dir] = list
    }

    /// Makes `path` the current scene (`setScenePath`). A directory path that
    /// directly holds scenes selects its first scene. Anything else: 1009006.
    public mutating func setScenePath(_ path: String) throws(ProtocolError) {
        if containsScene(path) {
            scenePath = path
        } else if ScenePath.isValidDirectory(path), let first = directories[path]?.first {
            scenePath = ScenePath.join(path, first.name)
        } else {
            throw .invalidArgument("unknown scene path")
        }
    }

    /// Removes a scene, or a directory with everything beneath it
    /// (`removeScenes`; `/` removes all). An unknown path is 1009006. See the
    /// type's documentation for where the current scene goes.
    public mutating func removeScenes(path: String) throws(ProtocolError) {
        if path != ScenePath.root, let (directory, name) = ScenePath.split(path), containsScene(path) {
            var list = directories[directory] ?? []
            list.removeAll { $0.name == name }
            directories[directory] = list.isEmpty ? nil : list
        } else if ScenePath.isValidDirectory(path), containsDirectory(path) {
            let doomed = directories.keys.filter { ScenePath.isWithin($0, directory: path) }
            for key in doomed {
                directories.removeValue(forKey: key)
            }
        } else {
            throw .invalidArgument("unknown scene path")
        }
        if !containsScene(scenePath) {
            fallBack()
        }
    }

    /// Appends `image` to the current scene's images (`insertImage`). An
    /// image UUID already on the current scene is 1009006.
    public mutating func insertImage(_ image: Image) throws(ProtocolError) {
        guard let (directory, name) = ScenePath.split(scenePath),
            var list = directories[directory],
            let index = list.firstIndex(where: { $0.name == name })
        else {
            throw ProtocolError(code: .internalError, message: "current scene missing")
        }
        guard !list[index].images.contains(where: { $0.uuid == image.uuid }) else {
            throw .invalidArgument("image.uuid already on this scene")
        }
        list[index].images.append(image)
        directories[directory] = list
    }

    private mutating func fallBack() {
        let directory = ScenePath.split(scenePath)?.directory ?? ScenePath.root
        for candidate in [directory] + ScenePath.ancestors(of: directory) {
            if let first = directories[candidate]?.first {
                scenePath = ScenePath.join(candidate, first.name)
                return
            }
        }
        let firstDirectory = directories.keys.min { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        if let firstDirectory, let first = directories[firstDirectory]?.first {
            scenePath = ScenePath.join(firstDirectory, first.name)
            return
        }
        self = SceneTree()
    }
}

// MARK: - Persistence form

extension SceneTree {
    /// A JSON form for the server's durable snapshots:
    /// `{"scenePath": "/init", "directories": {"/": [Scene, ...], ...}}`.
    public var json: JSON {
        .object([
            "scenePath": .string(scenePath),
            "directories": .object(directories.mapValues { .array($0.map(\.json)) }),
        ])
    }

    /// Decodes and validates the form written by ``json``, enforcing the
    /// type's invariants.
    public init(json: JSON) throws(ProtocolError) {
        let fields = try FieldReader(json, what: "sceneTree")
        let path = try fields.string("scenePath")
        var tree = SceneTree()
        tree.directories = [:]
        for (directory, value) in try fields.object("directories") {
            guard let list = value.arrayValue else { throw .malformed("sceneTree directories must be arrays") }
            var scenes: [Scene] = []
            for item in list {
                scenes.append(try Scene(json: item))
            }
            guard ScenePath.isValidDirectory(directory), !scenes.isEmpty else {
                throw .invalidArgument("sceneTree has an invalid directory")
            }
            guard Set(scenes.map(\.name)).count == scenes.count else {
                throw .invalidArgument("sceneTree directory repeats a name")
            }
            tree.directories[directory] = scenes
        }
        for (directory, scenes) in tree.directories {
            for scene in scenes where tree.containsDirectory(ScenePath.join(directory, scene.name)) {
                throw .invalidArgument("sceneTree path is both a scene and a directory")
            }
        }
        guard tree.containsScene(path) else { throw .invalidArgument("sceneTree.scenePath is unknown") }
        tree.scenePath = path
        self = tree
    }
}
