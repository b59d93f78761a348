// Validation of the identifiers that appear on the wire.

/// Room IDs: 1–128 characters of `[A-Za-z0-9_.:-]` (PROTOCOL.md §2).
public enum RoomID {
    /// The longest valid room ID, in characters (all ASCII, so also bytes).
    public static let maxLength = 128

    /// Whether `string` is a valid room ID. Checks the UTF-8 bytes directly.
    public static func isValid(_ string: String) -> Bool {
        let utf8 = string.utf8
        if let result = utf8.withContiguousStorageIfAvailable({ isValid(bytes: $0) }) {
            return result
        }
        return isValid(bytes: Array(utf8))
    }

    /// Whether `bytes` (UTF-8) are a valid room ID.
    public static func isValid(bytes: some Collection<UInt8>) -> Bool {
        guard !bytes.isEmpty, bytes.count <= maxLength else { return false }
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: ":"), UInt8(ascii: "-"):
                continue
            default:
                return false
            }
        }
        return true
    }
}

/// User IDs (the token's `sub`, `user.id` in `login`, `magix` `to`).
///
/// PROTOCOL.md does not constrain them; this project's rule is 1–128 UTF-8
/// bytes with no control characters (Unicode general category Cc: U+0000–
/// U+001F and U+007F–U+009F). Any other printable text is allowed, so IDs
/// from an app's own user database (e-mail addresses, UUIDs, names) fit.
/// The same rule applies to stream IDs.
public enum UserID {
    /// The longest valid user ID, in UTF-8 bytes.
    public static let maxBytes = 128

    /// Whether `string` is a valid user ID.
    public static func isValid(_ string: String) -> Bool {
        let byteCount = string.utf8.count
        guard byteCount > 0, byteCount <= maxBytes else { return false }
        return !TextRules.containsControl(string)
    }
}

/// Shared checks on free-form text fields.
enum TextRules {
    /// Whether `string` has a control character (general category Cc).
    static func containsControl(_ string: String) -> Bool {
        for scalar in string.unicodeScalars {
            let value = scalar.value
            if value < 0x20 || (value >= 0x7F && value <= 0x9F) {
                return true
            }
        }
        return false
    }

    /// Whether `string` is 1...`maxBytes` UTF-8 bytes long.
    static func hasLength(_ string: String, atMost maxBytes: Int) -> Bool {
        let count = string.utf8.count
        return count > 0 && count <= maxBytes
    }
}
