// Scene and broadcast value types (PROTOCOL.md §7) with validation and JSON forms.
//
// Each `init(json:)` reports a missing field or a wrong JSON type as 1009001
// and a well-typed but invalid value as 1009006. Optional fields accept
// absence or `null`; `json` leaves out `nil` optionals except `ppt` and
// `broadcasterId`, which the spec shows as `null`.

/// An image placed on a scene.
public struct Image: Sendable, Hashable {
    /// The image's unique ID within its scene (1–128 bytes).
    public var uuid: String
    /// Where the image is loaded from (1–4096 bytes).
    public var url: String
    /// Horizontal position of the image's centre, in whiteboard coordinates.
    public var x: Double
    /// Vertical position of the image's centre, in whiteboard coordinates.
    public var y: Double
    /// Width in whiteboard units (≥ 0).
    public var width: Double
    /// Height in whiteboard units (≥ 0).
    public var height: Double

    /// Creates an image; values are not validated (use `init(json:)` for input).
    public init(uuid: String, url: String, x: Double, y: Double, width: Double, height: Double) {
        self.uuid = uuid
        self.url = url
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }

    /// Decodes and validates `{uuid, url, x, y, width, height}`.
    public init(json: JSON) throws(ProtocolError) {
        let fields = try FieldReader(json, what: "image")
        uuid = try fields.string("uuid")
        url = try fields.string("url")
        x = try fields.number("x")
        y = try fields.number("y")
        width = try fields.number("width")
        height = try fields.number("height")
        guard TextRules.hasLength(uuid, atMost: ProtocolLimits.maxUUIDBytes),
            !TextRules.containsControl(uuid)
        else {
            throw .invalidArgument("image.uuid must be 1–128 bytes of printable text")
        }
        guard TextRules.hasLength(url, atMost: ProtocolLimits.maxURLBytes) else {
            throw .invalidArgument("image.url must be 1–4096 bytes")
        }
        guard width >= 0, height >= 0 else {
            throw .invalidArgument("image width and height must not be negative")
        }
    }

    /// The wire form.
    public var json: JSON {
        .object([
            "uuid": .string(uuid), "url": .string(url), "x": .double(x), "y": .double(y),
            "width": .double(width), "height": .double(height),
        ])
    }
}

/// A converted document page shown as a scene's background.
public struct PPT: Sendable, Hashable {
    /// The page's URL (1–4096 bytes; final, after the client's URL interrupters).
    public var src: String
    /// Page width (≥ 0).
    public var width: Double
    /// Page height (≥ 0).
    public var height: Double

    /// Creates a page; values are not validated.
    public init(src: String, width: Double, height: Double) {
        self.src = src
        self.width = width
        self.height = height
    }

    /// Decodes and validates `{src, width, height}`.
    public init(json: JSON) throws(ProtocolError) {
        let fields = try FieldReader(json, what: "ppt")
        src = try fields.string("src")
        width = try fields.number("width")
        height = try fields.number("height")
        guard TextRules.hasLength(src, atMost: ProtocolLimits.maxURLBytes) else {
            throw .invalidArgument("ppt.src must be 1–4096 bytes")
        }
        guard width >= 0, height >= 0 else {
            throw .invalidArgument("ppt width and height must not be negative")
        }
    }

    /// The wire form.
    public var json: JSON {
        .object(["src": .string(src), "width": .double(width), "height": .double(height)])
    }
}

/// One whiteboard scene (page).
public struct Scene: Sendable, Hashable {
    /// The scene's name within its directory (see ``ScenePath/isValidName(_:)``).
    public var name: String
    /// The background page, if any.
    public var ppt: PPT?
    /// Images inserted on this scene, in insertion order.
    public var images: [Image]

    /// Creates a scene; the name is not validated.
    public init(name: String, ppt: PPT? = nil, images: [Image] = []) {
        self.name = name
        self.ppt = ppt
        self.images = images
    }

    /// Decodes and validates `{name, ppt?, images?}` (`images` defaults to
    /// empty; image UUIDs must be unique within the scene).
    public init(json: JSON) throws(ProtocolError) {
        let fields = try FieldReader(json, what: "scene")
        name = try fields.string("name")
        let list = try fields.optionalArray("images") ?? []
        if let value = fields.present("ppt") {
            ppt = try PPT(json: value)
        } else {
            ppt = nil
        }
        var images: [Image] = []
        images.reserveCapacity(list.count)
        for value in list {
            images.append(try Image(json: value))
        }
        self.images = images
        guard ScenePath.isValidName(name) else {
            throw .invalidArgument("scene.name must be 1–256 bytes without '/' or control characters")
        }
        guard Set(images.map(\.uuid)).count == images.count else {
            throw .invalidArgument("scene.images repeats a uuid")
        }
    }

    /// The wire form (`ppt` is `null` when absent).
    public var json: JSON {
        .object(["name": .string(name), "ppt": ppt?.json ?? .null, "images": .array(images.map(\.json))])
    }
}

/// The scenes of the current directory and which one is shown.
public struct SceneState: Sendable, Hashable {
    /// The current scene's full path, e.g. `/init`.
    public var scenePath: String
    /// The scenes of the directory of ``scenePath``, in order.
    public var scenes: [Scene]
    /// The index of the current scene in ``scenes``.
    public var index: Int

    /// The scenes of a new room: one, `init`.
    public static let initialScenes = [Scene(name: "init")]

    /// Creates a scene state; values are not validated.
    public init(scenePath: String, scenes: [Scene], index: Int) {
        self.scenePath = scenePath
        self.scenes = scenes
        self.index = index
    }

    /// Decodes and validates `{scenePath, scenes, index}`: the path must be a
    /// valid scene path, `scenes` non-empty with unique names, and
    /// `scenes[index].name` the last component of `scenePath`.
    public init(json: JSON) throws(ProtocolError) {
        let fields = try FieldReader(json, what: "sceneState")
        scenePath = try fields.string("scenePath")
        let list = try fields.array("scenes")
        let rawIndex = try fields.integer("index")
        var scenes: [Scene] = []
        scenes.reserveCapacity(list.count)
        var names: Set<String> = []
        for value in list {
            let scene = try Scene(json: value)
            guard names.insert(scene.name).inserted else {
                throw .invalidArgument("sceneState.scenes repeats a name")
            }
            scenes.append(scene)
        }
        // Most rooms never leave the initial scene: share that one array
        // rather than keep a copy per room (a client caches 100,000 rooms).
        self.scenes = scenes == Self.initialScenes ? Self.initialScenes : scenes
        guard let (_, name) = ScenePath.split(scenePath) else {
            throw .invalidArgument("sceneState.scenePath is not a valid scene path")
        }
        guard let index = Int(exactly: rawIndex), scenes.indices.contains(index) else {
            throw .invalidArgument("sceneState.index is out of range")
        }
        guard scenes[index].name == name else {
            throw .invalidArgument("sceneState.scenes[index] does not match scenePath")
        }
        self.index = index
    }

    /// The wire form.
    public var json: JSON {
        .object([
            "scenePath": .string(scenePath), "scenes": .array(scenes.map(\.json)),
            "index": .int(Int64(index)),
        ])
    }
}

/// How members' views follow each other (whiteboard view modes).
public enum ViewMode: String, Sendable, Hashable, CaseIterable {
    /// Everyone moves their own view.
    case freedom
    /// This member is the broadcaster; others may follow.
    case broadcaster
    /// This member follows the broadcaster.
    case follower
}

/// Who, if anyone, is broadcasting their view.
public struct BroadcastState: Sendable, Hashable {
    /// The room's view mode.
    public var mode: ViewMode
    /// The broadcasting member, or `nil`.
    public var broadcasterId: Int64?

    /// Creates a broadcast state.
    public init(mode: ViewMode, broadcasterId: Int64? = nil) {
        self.mode = mode
        self.broadcasterId = broadcasterId
    }

    /// Decodes and validates `{mode, broadcasterId}`: `mode` must be one of
    /// the three view modes, `broadcasterId` a positive integer or absent/null.
    public init(json: JSON) throws(ProtocolError) {
        let fields = try FieldReader(json, what: "broadcastState")
        let raw = try fields.string("mode")
        guard let mode = ViewMode(rawValue: raw) else {
            throw .invalidArgument("broadcastState.mode must be freedom, broadcaster or follower")
        }
        self.mode = mode
        broadcasterId = try fields.optionalInteger("broadcasterId")
        if let id = broadcasterId, id <= 0 {
            throw .invalidArgument("broadcastState.broadcasterId must be positive")
        }
    }

    /// The wire form (`broadcasterId` is `null` when absent).
    public var json: JSON {
        .object(["mode": .string(mode.rawValue), "broadcasterId": broadcasterId.map(JSON.int) ?? .null])
    }
}
