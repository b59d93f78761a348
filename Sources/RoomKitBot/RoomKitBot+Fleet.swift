// Fleet mode lives in its own module (RoomKitFleet: the lease machine, its
// Redis driver `FleetCoordinator`, `FleetConfig`, the Lua scripts). The bot
// host's public API names its types (`BotConfig.fleet: FleetConfig?`), so
// whoever imports RoomKitBot gets them too.
@_exported import RoomKitFleet
