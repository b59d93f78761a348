import Foundation

/// Settings for outgoing HTTP requests.
public struct HTTPClientConfiguration: Sendable, Hashable {
    /// How long the TCP (and TLS) connection may take to open.
    public var connectTimeout: Duration = .seconds(10)
    /// How long a whole request may take, from connecting to the last body byte.
    public var timeout: Duration = .seconds(30)
    /// Largest response body accepted; a larger one fails with `.bodyTooLarge`.
    public var maxBodyBytes = 64 << 20
    /// PEM file of certificate authorities to trust for `https://` (default: the system's).
    public var tlsCAFile: String?
    /// Accept a self-signed server certificate (development only).
    public var allowSelfSigned = false
    /// Skip the check that the certificate names the host (development only).
    public var skipHostnameCheck = false

    public init() {}
}

/// A parsed `http://` or `https://` URL.
public struct HTTPURL: Sendable, Hashable, CustomStringConvertible {
    /// Whether the URL is `https://`.
    public let secure: Bool
    /// Host name or address.
    public let host: String
    /// Port (default 80 or 443).
    public let port: Int
    /// Path including any query, percent-encoded as given (default `/`).
    public let path: String

    /// Parses `string`; throws `.invalidURL` naming what is wrong.
    public init(_ string: String) throws(HTTPClientError) {
        guard let components = URLComponents(string: string), let scheme = components.scheme?.lowercased() else {
            throw HTTPClientError(.invalidURL, "not a URL: \(string)")
        }
        guard scheme == "http" || scheme == "https" else {
            throw HTTPClientError(.invalidURL, "scheme must be http or https: \(string)")
        }
        guard let host = components.host, !host.isEmpty else {
            throw HTTPClientError(.invalidURL, "missing host: \(string)")
        }
        var path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let query = components.percentEncodedQuery { path += "?" + query }
        self.init(secure: scheme == "https", host: host, port: components.port ?? (scheme == "https" ? 443 : 80),
                  path: path)
    }

    /// A URL from its parts; `path` must start with `/` and be percent-encoded.
    public init(secure: Bool, host: String, port: Int, path: String) {
        self.secure = secure
        self.host = host
        self.port = port
        self.path = path.hasPrefix("/") ? path : "/" + path
    }

    /// The `Host` header: the host, plus the port when it is not the scheme's default.
    public var hostHeader: String {
        let bracketed = host.contains(":") ? "[\(host)]" : host
        return port == (secure ? 443 : 80) ? bracketed : "\(bracketed):\(port)"
    }

    public var description: String { "\(secure ? "https" : "http")://\(hostHeader)\(path)" }
}

/// Why an HTTP request failed.
public struct HTTPClientError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The failure's kind (extensible).
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let raw: String
        /// The URL is not an `http://` or `https://` URL.
        public static let invalidURL = Code(raw: "invalidURL")
        /// The connection could not be opened (refused, unreachable, DNS, TLS).
        public static let connectFailed = Code(raw: "connectFailed")
        /// The connection did not open within `connectTimeout`, or the
        /// request did not finish within `timeout`.
        public static let timedOut = Code(raw: "timedOut")
        /// The server answered with a status outside 200–299 (collecting
        /// requests only); `status` and `body` hold its answer.
        public static let httpStatus = Code(raw: "httpStatus")
        /// The body is larger than `maxBodyBytes`.
        public static let bodyTooLarge = Code(raw: "bodyTooLarge")
        /// The connection dropped before the response was complete.
        public static let aborted = Code(raw: "aborted")
        /// `HTTPClientRequest.cancel()` was called (or the awaiting task was cancelled).
        public static let cancelled = Code(raw: "cancelled")
        /// The client or its loop is shut down.
        public static let shutdown = Code(raw: "shutdown")
        public var description: String { raw }
    }

    /// The failure's kind.
    public let code: Code
    /// What libwebsockets or the client said.
    public let detail: String
    /// The HTTP status, for `.httpStatus`.
    public let status: Int?
    /// The response body, for `.httpStatus` (servers put their error there).
    public let body: [UInt8]

    public init(_ code: Code, _ detail: String, status: Int? = nil, body: [UInt8] = []) {
        self.code = code
        self.detail = detail
        self.status = status
        self.body = body
    }

    public var description: String {
        "\(code): \(detail)" + (status.map { " (HTTP \($0))" } ?? "")
    }
}

/// A complete response.
public struct HTTPClientResponse: Sendable, Hashable {
    /// The HTTP status code.
    public let status: Int
    /// The `Content-Type` header, if sent.
    public let contentType: String?
    /// The whole body (chunked framing removed).
    public let body: [UInt8]

    public init(status: Int, contentType: String?, body: [UInt8]) {
        self.status = status
        self.contentType = contentType
        self.body = body
    }

    /// The body decoded as UTF-8 (invalid bytes replaced).
    public var text: String { String(decoding: body, as: UTF8.self) }
}

/// What a streaming request reports, in this order: one `head`, any number
/// of `body` chunks, then exactly one of `end` or `failure` (a failure may
/// also come first, without a head).
public enum HTTPClientEvent: Sendable, Hashable {
    /// The status line and headers arrived.
    case head(status: Int, contentType: String?)
    /// A piece of the body (chunked framing removed).
    case body([UInt8])
    /// The body is complete.
    case end
    /// The request failed; nothing follows.
    case failure(HTTPClientError)
}
