/// What `--version` prints: the release version and the git revision the
/// binaries were built from (`unknown` outside a git checkout, unless the
/// build set `ROOMKIT_REVISION`).
public enum BuildInfo {
    /// The release version (see CHANGELOG.md).
    public static let version = "0.1.0"

    /// The git revision at build time (12 hex digits), or `unknown`.
    public static let revision = GeneratedRevision.value

    /// `0.1.0 (revision 0123456789ab)`: the text after the program name.
    public static var versionText: String { "\(version) (revision \(revision))" }
}
