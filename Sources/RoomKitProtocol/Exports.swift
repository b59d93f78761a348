// The JSON value every message is made of lives in its own module (no
// dependency, so the plugin SDK can use it without OpenSSL); whoever
// imports the protocol gets it too.
@_exported import RoomKitJSON
