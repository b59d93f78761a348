import RoomKitSQLite

/// Errors of the bot's store name the file, the statement and SQLite's message.
public typealias BotStoreError = SQLiteError
