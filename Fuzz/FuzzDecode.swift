// libFuzzer target: any bytes a client might send roomd. Parses JSON,
// decodes the envelope (every op's validation), and checks that what parses
// also serializes and re-parses to the same value. roomd's byte-level read
// of logins (`ClientEnvelope.scanLogin`) must agree with that full decode
// whenever it answers.
import RoomKitProtocol

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDecode(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    let login = ClientEnvelope.scanLogin(Array(bytes))
    guard let json = try? JSON.parse(bytes) else {
        precondition(login == nil, "scanLogin read a message that does not parse")
        return 0
    }
    if let login {
        guard case .success(let envelope) = ClientEnvelope.decode(json) else {
            preconditionFailure("scanLogin read a message the decoder rejects")
        }
        precondition(login == envelope, "scanLogin disagrees with the decoder")
    }
    let again = try? JSON.parse(json.serialized())
    precondition(again == json, "JSON round trip changed the value")
    switch ClientEnvelope.decode(json) {
    case .success(let envelope):
        // A decoded request must encode back to something that decodes.
        if case .failure(let failure) = ClientEnvelope.decode(envelope.json) {
            preconditionFailure("re-decoding a decoded request failed: \(failure)")
        }
    case .failure(let failure):
        _ = failure.response.serialized()
    }
    return 0
}
