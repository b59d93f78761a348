import RoomKitJSON

// The room's content written straight as JSON text, with no tree of `JSON`
// values in between: each `appendJSON(to:)` writes the same object as the
// type's `json` (member order aside, which JSON leaves open). A login reply
// carries a whole snapshot, and roomd wrote it by building that tree and
// serializing it (about 15% of roomd's CPU per login); the bot's store did
// the same for every session it saved (issue #26: 1,000,000 logins).
// `RoomStateWriteTests` checks each against `json`.

extension RoomSnapshot {
    /// Appends the login-reply fields (`replyFields`) as object members,
    /// without braces: `"state":…,"members":…,"streams":…,"extraInfo":…`.
    public func appendReplyMembers(to buffer: inout [UInt8]) {
        JSON.appendLiteral(#""state":"#, to: &buffer)
        state.appendJSON(to: &buffer)
        JSON.appendLiteral(#","members":["#, to: &buffer)
        for (index, member) in members.enumerated() {
            if index > 0 { buffer.append(44) }  // ,
            member.appendJSON(to: &buffer)
        }
        JSON.appendLiteral(#"],"streams":["#, to: &buffer)
        for (index, stream) in streams.enumerated() {
            if index > 0 { buffer.append(44) }
            stream.appendJSON(to: &buffer)
        }
        JSON.appendLiteral(#"],"extraInfo":{"#, to: &buffer)
        var first = true
        for (key, value) in extraInfo {
            if !first { buffer.append(44) }
            first = false
            JSON.append(string: key, to: &buffer)
            buffer.append(58)  // :
            JSON.append(string: value, to: &buffer)
        }
        JSON.appendLiteral("}", to: &buffer)
    }

    /// `JSON.object(replyFields)` as text.
    public func replyFieldsJSON() -> [UInt8] {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(320)
        buffer.append(123)  // {
        appendReplyMembers(to: &buffer)
        buffer.append(125)  // }
        return buffer
    }
}

extension RoomState {
    /// Appends `json` as text.
    public func appendJSON(to buffer: inout [UInt8]) {
        JSON.appendLiteral(#"{"globalState":"#, to: &buffer)
        appendObject(globalState, to: &buffer)
        JSON.appendLiteral(#","sceneState":"#, to: &buffer)
        sceneState.appendJSON(to: &buffer)
        JSON.appendLiteral(#","broadcastState":"#, to: &buffer)
        broadcastState.appendJSON(to: &buffer)
        buffer.append(125)  // }
    }
}

extension SceneState {
    /// Appends `json` as text.
    public func appendJSON(to buffer: inout [UInt8]) {
        JSON.appendLiteral(#"{"scenePath":"#, to: &buffer)
        JSON.append(string: scenePath, to: &buffer)
        JSON.appendLiteral(#","scenes":["#, to: &buffer)
        for (position, scene) in scenes.enumerated() {
            if position > 0 { buffer.append(44) }
            scene.appendJSON(to: &buffer)
        }
        JSON.appendLiteral(#"],"index":"#, to: &buffer)
        JSON.append(integer: Int64(index), to: &buffer)
        buffer.append(125)
    }
}

extension Scene {
    /// Appends `json` as text (`ppt` is `null` when absent).
    public func appendJSON(to buffer: inout [UInt8]) {
        JSON.appendLiteral(#"{"name":"#, to: &buffer)
        JSON.append(string: name, to: &buffer)
        JSON.appendLiteral(#","ppt":"#, to: &buffer)
        if let ppt {
            ppt.json.serialize(into: &buffer)
        } else {
            JSON.appendLiteral("null", to: &buffer)
        }
        JSON.appendLiteral(#","images":["#, to: &buffer)
        for (position, image) in images.enumerated() {
            if position > 0 { buffer.append(44) }
            image.json.serialize(into: &buffer)
        }
        JSON.appendLiteral("]}", to: &buffer)
    }
}

extension BroadcastState {
    /// Appends `json` as text (`broadcasterId` is `null` when absent).
    public func appendJSON(to buffer: inout [UInt8]) {
        JSON.appendLiteral(#"{"mode":"#, to: &buffer)
        JSON.append(string: mode.rawValue, to: &buffer)
        JSON.appendLiteral(#","broadcasterId":"#, to: &buffer)
        if let broadcasterId {
            JSON.append(integer: broadcasterId, to: &buffer)
        } else {
            JSON.appendLiteral("null", to: &buffer)
        }
        buffer.append(125)
    }
}

extension Member {
    /// Appends `json` as text (`name` and `payload` left out when nil).
    public func appendJSON(to buffer: inout [UInt8]) {
        JSON.appendLiteral(#"{"memberId":"#, to: &buffer)
        JSON.append(integer: memberId, to: &buffer)
        JSON.appendLiteral(#","userId":"#, to: &buffer)
        JSON.append(string: userId, to: &buffer)
        appendNameAndPayload(name, payload, to: &buffer)
        JSON.appendLiteral(#","memberState":"#, to: &buffer)
        appendObject(memberState, to: &buffer)
        buffer.append(125)
    }
}

extension MediaStream {
    /// Appends `json` as text (`extraInfo` left out when nil).
    public func appendJSON(to buffer: inout [UInt8]) {
        JSON.appendLiteral(#"{"id":"#, to: &buffer)
        JSON.append(string: id, to: &buffer)
        JSON.appendLiteral(#","userId":"#, to: &buffer)
        JSON.append(string: userId, to: &buffer)
        if let extraInfo {
            JSON.appendLiteral(#","extraInfo":"#, to: &buffer)
            JSON.append(string: extraInfo, to: &buffer)
        }
        buffer.append(125)
    }
}

extension LoginReply {
    /// `ServerMessage.reply(id:login:)` as text: the reply roomd sends.
    public func replyJSON(id: Int64) -> [UInt8] {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(snapshot == nil ? 192 : 448)
        JSON.appendLiteral(#"{"op":"reply","id":"#, to: &buffer)
        JSON.append(integer: id, to: &buffer)
        JSON.appendLiteral(#","ok":true,"session":"#, to: &buffer)
        JSON.append(string: session, to: &buffer)
        JSON.appendLiteral(#","memberId":"#, to: &buffer)
        JSON.append(integer: memberId, to: &buffer)
        JSON.appendLiteral(#","seq":"#, to: &buffer)
        JSON.append(integer: seq, to: &buffer)
        JSON.appendLiteral(recovered ? #","recovered":true"# : #","recovered":false"#, to: &buffer)
        JSON.appendLiteral(writable ? #","writable":true"# : #","writable":false"#, to: &buffer)
        JSON.appendLiteral(#","expiresAt":"#, to: &buffer)
        JSON.append(integer: expiresAt, to: &buffer)
        if let snapshot {
            buffer.append(44)
            snapshot.appendReplyMembers(to: &buffer)
        }
        buffer.append(125)
        return buffer
    }
}

extension ClientEnvelope {
    /// `json` as text. A `login` (every room's, and every resume after a
    /// reconnect) is written straight from its fields; the other requests
    /// go through `json`.
    public func serialized() -> [UInt8] {
        guard case .login(let login) = request, op == ClientOp.login.rawValue else { return json.serialized() }
        var buffer: [UInt8] = []
        buffer.reserveCapacity(login.token.utf8.count + 160)
        JSON.appendLiteral(#"{"op":"login""#, to: &buffer)
        if let id {
            JSON.appendLiteral(#","id":"#, to: &buffer)
            JSON.append(integer: id, to: &buffer)
        }
        if let room {
            JSON.appendLiteral(#","room":"#, to: &buffer)
            JSON.append(string: room, to: &buffer)
        }
        JSON.appendLiteral(#","token":"#, to: &buffer)
        JSON.append(string: login.token, to: &buffer)
        JSON.appendLiteral(#","user":"#, to: &buffer)
        login.user.appendJSON(to: &buffer)
        JSON.appendLiteral(login.writable ? #","writable":true"# : #","writable":false"#, to: &buffer)
        if let resume = login.resume {
            JSON.appendLiteral(#","resume":{"session":"#, to: &buffer)
            JSON.append(string: resume.session, to: &buffer)
            JSON.appendLiteral(#","seq":"#, to: &buffer)
            JSON.append(integer: resume.seq, to: &buffer)
            buffer.append(125)
        }
        if let fence = login.fence {
            JSON.appendLiteral(#","fence":"#, to: &buffer)
            JSON.append(integer: fence, to: &buffer)
        }
        buffer.append(125)
        return buffer
    }
}

extension LoginUser {
    /// Appends `json` as text (`name` and `payload` left out when nil).
    public func appendJSON(to buffer: inout [UInt8]) {
        JSON.appendLiteral(#"{"id":"#, to: &buffer)
        JSON.append(string: id, to: &buffer)
        appendNameAndPayload(name, payload, to: &buffer)
        buffer.append(125)
    }
}

/// `,"name":…` and `,"payload":…`, each only when present (a member, a login user).
private func appendNameAndPayload(_ name: String?, _ payload: JSON?, to buffer: inout [UInt8]) {
    if let name {
        JSON.appendLiteral(#","name":"#, to: &buffer)
        JSON.append(string: name, to: &buffer)
    }
    if let payload {
        JSON.appendLiteral(#","payload":"#, to: &buffer)
        payload.serialize(into: &buffer)
    }
}

/// An app-defined object (`globalState`, `memberState`); the empty one, the
/// usual case, without making a `JSON` value.
private func appendObject(_ members: [String: JSON], to buffer: inout [UInt8]) {
    if members.isEmpty {
        JSON.appendLiteral("{}", to: &buffer)
    } else {
        JSON.object(members).serialize(into: &buffer)
    }
}
