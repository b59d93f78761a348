import RoomKitProtocol

/// Foundation also has a `Stream`; inside this module the name means the
/// room's media stream record.
typealias Stream = RoomKitProtocol.Stream
