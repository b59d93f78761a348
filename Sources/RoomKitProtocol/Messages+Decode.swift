// Decoding and validation of client messages (PROTOCOL.md §2 rules).

extension ClientEnvelope {
    /// Decodes and validates one client message.
    ///
    /// Checks, in order (the first failure wins):
    /// 1. not an object: 1009001;
    /// 2. `id` present but not a number: 1009001; a number that is not a
    ///    positive integer (integral doubles such as `7.0` count as integers): 1009006;
    ///    after either, the failure carries no `id` (there is nothing to reply to);
    /// 3. `op` missing or not a string: 1009001;
    /// 4. unknown `op`: 1009002;
    /// 5. a request op (all but `ping`) without `id`: 1009001;
    /// 6. room-scoped ops: `room` missing or not a string: 1009001, not a
    ///    valid room ID: 1009006 (`hello` and `ping` ignore `room`);
    /// 7. the op's fields: missing or wrong JSON type 1009001, invalid value 1009006.
    ///
    /// Unknown fields are ignored. Failures carry the valid `id` and `room`
    /// seen so far so the caller can answer (see ``DecodeFailure/response``).
    public static func decode(_ json: JSON) -> Result<ClientEnvelope, DecodeFailure> {
        guard case .object(let members) = json else {
            return .failure(DecodeFailure(error: .malformed("message must be a JSON object")))
        }
        let fields = FieldReader(members)
        var failure = DecodeFailure(error: .malformed(""))
        if let rawRoom = members["room"]?.stringValue, RoomID.isValid(rawRoom) {
            failure.room = rawRoom
        }
        var id: Int64?
        if let rawID = members["id"] {
            do throws(ProtocolError) {
                let value = try FieldReader.integer(rawID, name: "id")
                guard value > 0 else { throw .invalidArgument("id must be a positive integer") }
                id = value
            } catch {
                failure.error = error
                return .failure(failure)
            }
        }
        failure.id = id
        guard let opValue = members["op"] else {
            failure.error = .malformed("missing op")
            return .failure(failure)
        }
        guard let op = opValue.stringValue else {
            failure.error = .malformed("op must be a string")
            return .failure(failure)
        }
        failure.op = op
        guard let clientOp = ClientOp(rawValue: op) else {
            failure.error = ProtocolError(code: .unknownOp, message: "unknown op")
            return .failure(failure)
        }
        if clientOp.isRequest, id == nil {
            failure.error = .malformed("missing id")
            return .failure(failure)
        }
        do throws(ProtocolError) {
            var room: String?
            if clientOp.isRoomScoped {
                let value = try fields.string("room")
                guard RoomID.isValid(value) else {
                    throw .invalidArgument("room must be 1–128 characters of A-Z a-z 0-9 _ . : -")
                }
                room = value
            }
            let request = try decodeRequest(clientOp, fields)
            var envelope = ClientEnvelope(id: id, room: room, request: request)
            envelope.op = op
            return .success(envelope)
        } catch {
            failure.error = error
            return .failure(failure)
        }
    }

    /// Decodes the op-specific fields.
    private static func decodeRequest(_ op: ClientOp, _ fields: FieldReader) throws(ProtocolError) -> ClientRequest {
        switch op {
        case .hello:
            return .hello(client: try fields.optionalString("client"), token: try fields.optionalString("token"),
                          batch: try fields.optionalBool("batch") ?? false)
        case .ping:
            return .ping(t: fields.members["t"] ?? .null)
        case .login:
            return .login(try decodeLogin(fields))
        case .logout:
            return .logout
        case .setState:
            let patch = try fields.object("patch")
            try RoomState.validate(patch: patch)
            return .setState(patch: patch)
        case .setMemberState:
            return .setMemberState(try fields.object("memberState"))
        case .magix:
            return try decodeMagix(fields)
        case .putScenes:
            return try decodePutScenes(fields)
        case .setScenePath:
            return .setScenePath(path: try scenePath(fields))
        case .removeScenes:
            return .removeScenes(path: try scenePath(fields))
        case .insertImage:
            return .insertImage(try Image(json: try fields.require("image")))
        case .setViewMode:
            guard let mode = ViewMode(rawValue: try fields.string("mode")) else {
                throw .invalidArgument("mode must be freedom, broadcaster or follower")
            }
            return .setViewMode(mode)
        case .publishStream:
            let stream = try FieldReader(try fields.require("stream"), what: "stream")
            let id = try stream.string("id")
            let extraInfo = try stream.optionalString("extraInfo")
            guard UserID.isValid(id) else { throw .invalidArgument("stream.id is not a valid stream ID") }
            if let extraInfo, extraInfo.utf8.count > ProtocolLimits.maxExtraInfoValueBytes {
                throw .invalidArgument("stream.extraInfo is longer than 4096 bytes")
            }
            return .publishStream(id: id, extraInfo: extraInfo)
        case .unpublishStream:
            let id = try fields.string("streamID")
            guard UserID.isValid(id) else { throw .invalidArgument("streamID is not a valid stream ID") }
            return .unpublishStream(streamID: id)
        case .setExtraInfo:
            let key = try fields.string("key")
            let value = try fields.string("value")
            guard TextRules.hasLength(key, atMost: ProtocolLimits.maxExtraInfoKeyBytes) else {
                throw .invalidArgument("key must be 1–128 bytes")
            }
            guard value.utf8.count <= ProtocolLimits.maxExtraInfoValueBytes else {
                throw .invalidArgument("value is longer than 4096 bytes")
            }
            return .setExtraInfo(key: key, value: value)
        case .renewToken:
            return .renewToken(token: try fields.string("token"))
        case .setWritable:
            return .setWritable(try fields.bool("writable"))
        }
    }

    private static func decodeLogin(_ fields: FieldReader) throws(ProtocolError) -> LoginRequest {
        let token = try fields.string("token")
        let user = try FieldReader(try fields.require("user"), what: "user")
        let userID = try user.string("id")
        let name = try user.optionalString("name")
        let payload = user.present("payload")
        let writable = try fields.optionalBool("writable") ?? true
        var resume: ResumePoint?
        if let value = fields.present("resume") {
            let reader = try FieldReader(value, what: "resume")
            let session = try reader.string("session")
            let seq = try reader.integer("seq")
            guard TextRules.hasLength(session, atMost: ProtocolLimits.maxSessionBytes) else {
                throw .invalidArgument("resume.session must be 1–128 bytes")
            }
            guard seq >= 0 else { throw .invalidArgument("resume.seq must not be negative") }
            resume = ResumePoint(session: session, seq: seq)
        }
        let fence = try fields.optionalInteger("fence")
        if let fence, fence < 0 { throw .invalidArgument("fence must not be negative") }
        guard UserID.isValid(userID) else { throw .invalidArgument("user.id is not a valid user ID") }
        if let name, name.utf8.count > ProtocolLimits.maxUserNameBytes {
            throw .invalidArgument("user.name is longer than 256 bytes")
        }
        return LoginRequest(
            token: token, user: LoginUser(id: userID, name: name, payload: payload),
            writable: writable, resume: resume, fence: fence)
    }

    private static func decodeMagix(_ fields: FieldReader) throws(ProtocolError) -> ClientRequest {
        let event = try fields.string("event")
        let payload = fields.members["payload"] ?? .null
        var recipients: [String]?
        if let list = try fields.optionalArray("to") {
            var ids: [String] = []
            ids.reserveCapacity(min(list.count, ProtocolLimits.maxRecipients))
            for value in list {
                guard let id = value.stringValue else { throw .malformed("to must be an array of strings") }
                ids.append(id)
            }
            guard ids.count <= ProtocolLimits.maxRecipients else {
                throw .invalidArgument("to has more than 1000 recipients")
            }
            guard ids.allSatisfy(UserID.isValid) else { throw .invalidArgument("to has an invalid user ID") }
            recipients = ids
        }
        guard TextRules.hasLength(event, atMost: ProtocolLimits.maxEventBytes) else {
            throw .invalidArgument("event must be 1–128 bytes")
        }
        return .magix(event: event, payload: payload, to: recipients)
    }

    private static func decodePutScenes(_ fields: FieldReader) throws(ProtocolError) -> ClientRequest {
        let dir = try fields.string("dir")
        let list = try fields.array("scenes")
        let rawIndex = try fields.optionalInteger("index")
        var scenes: [Scene] = []
        scenes.reserveCapacity(list.count)
        for value in list {
            scenes.append(try Scene(json: value))
        }
        guard ScenePath.isValidDirectory(dir) else { throw .invalidArgument("dir is not a valid directory path") }
        guard !scenes.isEmpty else { throw .invalidArgument("scenes must not be empty") }
        guard Set(scenes.map(\.name)).count == scenes.count else {
            throw .invalidArgument("scenes repeat a name")
        }
        for scene in scenes where !ScenePath.isValidScene(ScenePath.join(dir, scene.name)) {
            throw .invalidArgument("scene path is longer than 1024 bytes")
        }
        var index: Int?
        if let rawIndex {
            guard rawIndex >= 0, let value = Int(exactly: rawIndex) else {
                throw .invalidArgument("index must not be negative")
            }
            index = value
        }
        return .putScenes(dir: dir, scenes: scenes, index: index)
    }

    private static func scenePath(_ fields: FieldReader) throws(ProtocolError) -> String {
        let path = try fields.string("path")
        guard ScenePath.isValidDirectory(path) else { throw .invalidArgument("path is not a valid scene path") }
        return path
    }
}
