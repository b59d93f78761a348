import RoomKitSQLite

/// A failed SQLite call of roomd's store: the file, what was being done
/// (the statement), and SQLite's message and result code.
public typealias StorageError = SQLiteError
