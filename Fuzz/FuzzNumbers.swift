// libFuzzer target (issue #27 §1): the input is one number as text, fed to
// every entry point that takes a number from outside and can run here: the
// checked conversions themselves, the recording query window (each of its
// four parameters, alone and against the others), JWT NumericDates (exp,
// iat, nbf on verify), a server's hello (heartbeat fields), and the plugin
// manifest's integer fields. Each must accept the number within its range
// or refuse it with its documented error; none may trap. The seed corpus
// holds Int64's edges, ±1 around them, 1e19, 1e300, NaN and infinity text,
// and huge exponents.
import COpenSSLCrypto
import Foundation
import RoomKitProtocol
import RoomKitTokens

private let signer = TokenSigner(secret: "fuzz-secret")
private let now: Int64 = 1_700_000_000

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzNumbers(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size <= 512 else { return 0 }
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)

    // The checked conversions: an accepted value is inside its range.
    if let value = try? ExternalNumber.integer(text, field: "x", in: ExternalNumber.epochMilliseconds) {
        precondition(ExternalNumber.epochMilliseconds.contains(value))
    }
    if let number = Double(text) {
        for range in [ExternalNumber.shortSeconds, ExternalNumber.longSeconds, ExternalNumber.tokenLifetimeSeconds,
                      ExternalNumber.progressSeconds] {
            if let duration = try? ExternalNumber.seconds(number, field: "x", in: range) {
                precondition(duration >= .zero && duration <= .seconds(Int64(range.upperBound) + 1))
                _ = duration.milliseconds
            }
        }
        _ = try? ExternalNumber.wholeSeconds(number, field: "x", in: ExternalNumber.tokenLifetimeSeconds)
    }

    // The recording window: the number in each parameter, with the others
    // absent, at 0, and at Int64's edges.
    let names = ["from", "to", "sliceStart", "sliceEnd"]
    for name in names {
        for other in [nil, "0", "-9223372036854775808", "9223372036854775807", "253402300799999"] {
            for otherName in names where otherName != name {
                let query: [String: String] = other.map { [name: text, otherName: $0] } ?? [name: text]
                do {
                    let window = try RecordingWindow(query: { query[$0] }, created: 1_700_000_000_000, now: 1_700_000_100_000)
                    precondition(window.begin <= window.end && window.sliceFrom >= window.begin && window.sliceTo <= window.end)
                    _ = window.answeredSliceEnd
                } catch {
                    precondition(error.code == .invalidArgument)
                }
            }
        }
    }

    // JSON forms: a token's dates, a hello's heartbeat, manifest integers.
    guard let json = try? JSON.parse(Array(text.utf8)), json.isNumber else { return 0 }
    for claim in ["exp", "iat", "nbf"] {
        var payload: [String: JSON] = ["sub": "u", "room": "*", "role": "writer", "exp": .int(now + 60), "iat": .int(now)]
        payload[claim] = json
        let token = signRaw(JSON.object(payload))
        if let claims = try? signer.verify(token, now: now) {
            precondition(ExternalNumber.epochSeconds.contains(claims.exp) && ExternalNumber.epochSeconds.contains(claims.iat))
            _ = claims.expiresAtMilliseconds
        }
    }
    for key in ["heartbeatInterval", "heartbeatTimeout"] {
        if let heartbeat = try? HelloReply.heartbeat(fields: [key: json]) {
            precondition(ExternalNumber.heartbeatMilliseconds.contains(heartbeat.interval)
                         && ExternalNumber.heartbeatMilliseconds.contains(heartbeat.timeout))
        }
    }
    for key in ["timeoutMs", "order", "storageLimitBytes", "hangFactor", "restartBackoffMs", "crashWindowSeconds",
                "shutdownTimeoutMs", "memoryLimitMB", "queueLimit"] {
        var plugin: [String: JSON] = ["name": "p", "library": "/etc/hostname", "abi": 1, "hooks": ["room"]]
        plugin[key] = json
        do {
            let manifest = try PluginManifest(json: ["manifestVersion": 1, "plugins": .array([.object(plugin)])],
                                              path: "/tmp/fuzz/plugins.json")
            let spec = manifest.plugins[0]
            // What `run` computes from these must not trap either.
            let limit = spec.timeout * spec.supervision.hangFactor
            _ = limit.components.seconds * 1_000_000_000 + limit.components.attoseconds / 1_000_000_000
            _ = UInt64(spec.supervision.crashWindowSeconds) * 1_000_000_000
        } catch {
            precondition(error.errors.allSatisfy { !$0.description.contains("\n") })
        }
    }
    return 0
}

/// A token with an arbitrary payload, signed with the fuzz secret
/// (OpenSSL's one-shot EVP_Q_mac; the product's signer takes typed claims only).
private func signRaw(_ payload: JSON) -> String {
    let header = Base64URL.encode(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
    let body = Base64URL.encode(payload.serialized(sortedKeys: true))
    let input = Array((header + "." + body).utf8)
    let key = Array("fuzz-secret".utf8)
    var mac = [UInt8](repeating: 0, count: 32)
    var length = 0
    _ = EVP_Q_mac(nil, "HMAC", nil, "SHA256", nil, key, key.count, input, input.count, &mac, mac.count, &length)
    return header + "." + body + "." + Base64URL.encode(Array(mac.prefix(Int(length))))
}
