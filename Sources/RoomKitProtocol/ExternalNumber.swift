// Numbers from outside: the one checked path (issue #27 §1).
//
// Every number RoomKit reads from outside its own process (an HTTP query
// string, a JWT claim, a wire field, a CLI flag, bot.json, a plugin manifest,
// a server's hello) is converted here, once, against a documented range.
// Inside that range every later `* 1000`, `+`, `-` and `Duration` conversion
// is free of overflow, so no input can trap the process. Outside it the
// caller gets a ``NumberRangeError`` naming the field and the range, and turns
// it into its documented answer: 400/1009006 on HTTP, a request error on the
// wire, a one-line message and exit 2 on a CLI or in a config file.
//
// The ranges are listed in docs/SECURITY.md ("Numeric limits").

/// A number from outside that is not a number, not an integer where one is
/// needed, or out of its field's range. The text names the field.
public struct NumberRangeError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The field, flag or parameter (`--ttl`, `from`, `plugins[0].timeoutMs`).
    public let field: String
    /// What is wrong, e.g. "must be an integer in 0...253402300799999, got '-1'".
    public let problem: String

    /// Creates an error for `field`.
    public init(field: String, problem: String) {
        self.field = field
        self.problem = problem
    }

    /// "field: problem".
    public var description: String { "\(field): \(problem)" }

    /// The error as a 1009006 protocol error (wire fields, HTTP answers).
    public var protocolError: ProtocolError { .invalidArgument(description) }
}

/// Checked conversions of numbers from outside, with the ranges RoomKit
/// enforces. Pure functions; thread-safe.
public enum ExternalNumber {
    // MARK: Ranges (docs/SECURITY.md "Numeric limits")

    /// The last millisecond of year 9999 (UTC): the largest wall-clock time,
    /// in ms since the Unix epoch, RoomKit accepts (recording `from`/`to`).
    public static let maxEpochMilliseconds: Int64 = 253_402_300_799_999
    /// The same instant in whole seconds (JWT `exp`, `iat`, `nbf`).
    public static let maxEpochSeconds: Int64 = 253_402_300_799
    /// Wall-clock times in ms: 0 through the end of year 9999.
    public static let epochMilliseconds: ClosedRange<Int64> = 0...maxEpochMilliseconds
    /// JWT NumericDates in seconds: 0 through the end of year 9999.
    public static let epochSeconds: ClosedRange<Int64> = 0...maxEpochSeconds
    /// Offsets in ms inside a recording (`sliceStart`, `sliceEnd`).
    public static let offsetMilliseconds: ClosedRange<Int64> = 0...maxEpochMilliseconds
    /// Short durations in seconds (heartbeat flags, fleet timings): 1 ms to 1 day.
    public static let shortSeconds: ClosedRange<Double> = 0.001...86_400
    /// Heartbeat interval and timeout a server may announce in `hello`, in ms.
    public static let heartbeatMilliseconds: ClosedRange<Int64> = 1...86_400_000
    /// Long durations in seconds (session retention, login timeout,
    /// reconnect window): 1 ms to 365 days.
    public static let longSeconds: ClosedRange<Double> = 0.001...31_536_000
    /// A token's lifetime in seconds (`roomd token --ttl`): 1 ms to 100 years.
    public static let tokenLifetimeSeconds: ClosedRange<Double> = 0.001...3_153_600_000
    /// Seconds between progress lines (`--progress-interval`): 0 to 1 day.
    public static let progressSeconds: ClosedRange<Double> = 0...86_400
    /// A plugin call's time limit (`timeoutMs` in a manifest): 1 ms to 10 min.
    public static let pluginTimeoutMilliseconds: ClosedRange<Int64> = 1...600_000

    // MARK: Integers

    /// Decimal integer text (an optional sign, then digits; nothing else) in
    /// `range`. Text beyond Int64 is out of range, never wrapped or trapped.
    public static func integer(
        _ text: some StringProtocol, field: String, in range: ClosedRange<Int64>
    ) throws(NumberRangeError) -> Int64 {
        let shown = text.count > 40 ? String(text.prefix(40)) + "…" : String(text)
        guard let value = Int64(text) else {
            throw NumberRangeError(field: field, problem: "must be an integer in \(range.shown), got '\(shown)'")
        }
        guard range.contains(value) else {
            throw NumberRangeError(field: field, problem: "must be in \(range.shown), got \(value)")
        }
        return value
    }

    /// A JSON number that is an integer (an integral double such as `7.0`
    /// counts) in `range`.
    public static func integer(
        _ json: JSON, field: String, in range: ClosedRange<Int64>
    ) throws(NumberRangeError) -> Int64 {
        guard json.isNumber else { throw NumberRangeError(field: field, problem: "must be a number") }
        guard let value = json.int64Value else {
            throw NumberRangeError(field: field, problem: "must be an integer in \(range.shown), got \(json.jsonString)")
        }
        guard range.contains(value) else {
            throw NumberRangeError(field: field, problem: "must be in \(range.shown), got \(value)")
        }
        return value
    }

    /// A JSON integer number of milliseconds in `range`, as a Duration.
    public static func milliseconds(
        _ json: JSON, field: String, in range: ClosedRange<Int64>
    ) throws(NumberRangeError) -> Duration {
        .milliseconds(try integer(json, field: field, in: range))
    }

    // MARK: Seconds (CLI flags and config files)

    /// Seconds with decimals as a Duration rounded to whole milliseconds.
    /// NaN, infinities and anything outside `range` are refused.
    public static func seconds(
        _ value: Double, field: String, in range: ClosedRange<Double>
    ) throws(NumberRangeError) -> Duration {
        guard value.isFinite, range.contains(value) else {
            throw NumberRangeError(field: field, problem: "must be a number of seconds in \(range.shown), got \(value.shown)")
        }
        // |value| <= range bound (at most ~3.2e9 s), so the product fits Int64.
        return .milliseconds(Int64((value * 1000).rounded()))
    }

    /// A JSON number of seconds; see ``seconds(_:field:in:)-(Double,_,_)``.
    public static func seconds(
        _ json: JSON, field: String, in range: ClosedRange<Double>
    ) throws(NumberRangeError) -> Duration {
        guard let value = json.doubleValue else {
            throw NumberRangeError(field: field, problem: "must be a number of seconds in \(range.shown)")
        }
        return try seconds(value, field: field, in: range)
    }

    /// Whole seconds, rounded up, for a lifetime in `range` (a token's TTL).
    public static func wholeSeconds(
        _ value: Double, field: String, in range: ClosedRange<Double>
    ) throws(NumberRangeError) -> Int64 {
        _ = try seconds(value, field: field, in: range)
        return Int64(value.rounded(.up))
    }
}

extension ClosedRange where Bound == Int64 {
    fileprivate var shown: String { "\(lowerBound)...\(upperBound)" }
}

extension ClosedRange where Bound == Double {
    fileprivate var shown: String { "\(lowerBound.shown)...\(upperBound.shown)" }
}

extension Double {
    /// `1200` for whole values, `0.001` otherwise; `nan`/`inf` as Swift spells them.
    fileprivate var shown: String {
        isFinite && self == rounded() && abs(self) < 1e15 ? String(Int64(self)) : "\(self)"
    }
}
