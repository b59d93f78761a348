// Scene paths: "/dir/sub/name". The directory of "/init" is "/".

/// Syntax of scene paths, directory paths and scene names.
///
/// - A *name* is 1–256 UTF-8 bytes without `/` and without control characters.
/// - A *scene path* is `/` followed by one or more names joined by `/`
///   (`/init`, `/lesson/page1`), at most 1024 bytes.
/// - A *directory path* is `/` (the root) or has the form of a scene path
///   (`/lesson`); no trailing slash.
public enum ScenePath {
    /// The root directory, `/`.
    public static let root = "/"

    /// Whether `name` is a valid scene or directory name.
    public static func isValidName(_ name: String) -> Bool {
        guard TextRules.hasLength(name, atMost: ProtocolLimits.maxSceneNameBytes) else {
            return false
        }
        return !name.utf8.contains(UInt8(ascii: "/")) && !TextRules.containsControl(name)
    }

    /// Whether `path` is a valid scene path (`/name` or `/dir/.../name`).
    public static func isValidScene(_ path: String) -> Bool {
        path != root && isValidDirectory(path)
    }

    /// Whether `path` is a valid directory path (`/`, or the form of a scene path).
    public static func isValidDirectory(_ path: String) -> Bool {
        if path == root { return true }
        guard path.utf8.count <= ProtocolLimits.maxScenePathBytes,
            path.utf8.first == UInt8(ascii: "/")
        else {
            return false
        }
        let names = path.utf8.dropFirst().split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        for name in names {
            guard let text = String(name), isValidName(text) else { return false }
        }
        return true
    }

    /// Splits a valid scene path into its directory and name:
    /// `/init` → (`/`, `init`); `/a/b/c` → (`/a/b`, `c`). `nil` for an
    /// invalid scene path.
    public static func split(_ path: String) -> (directory: String, name: String)? {
        guard isValidScene(path), let slash = path.lastIndex(of: "/") else { return nil }
        let name = String(path[path.index(after: slash)...])
        let directory = slash == path.startIndex ? root : String(path[..<slash])
        return (directory, name)
    }

    /// Joins a directory path and a name: (`/`, `init`) → `/init`;
    /// (`/a`, `b`) → `/a/b`.
    public static func join(_ directory: String, _ name: String) -> String {
        directory == root ? root + name : directory + "/" + name
    }

    /// Whether `path` is `directory` itself or lies beneath it.
    public static func isWithin(_ path: String, directory: String) -> Bool {
        if directory == root { return true }
        return path == directory || path.hasPrefix(directory + "/")
    }

    /// The directory paths above `path`, nearest first, ending with `/`:
    /// `/a/b/c` → [`/a/b`, `/a`, `/`]. Empty for `/`.
    public static func ancestors(of path: String) -> [String] {
        var result: [String] = []
        var current = path
        while current != root, let slash = current.lastIndex(of: "/") {
            current = slash == current.startIndex ? root : String(current[..<slash])
            result.append(current)
        }
        return result
    }
}
