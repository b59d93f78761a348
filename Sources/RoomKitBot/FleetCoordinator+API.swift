import Foundation
import RoomKit
import RoomKitLoop
import RoomKitProtocol
import RoomKitRedis

/// A fleet operation that could not be done (Redis unavailable, bad input).
struct FleetError: Error, Sendable, CustomStringConvertible {
    let message: String
    var description: String { message }
}

extension FleetCoordinator {
    /// Adds rooms to the fleet's room set; the owner of each room's shard
    /// joins it within a claim interval. Returns how many were new. Any thread.
    func addRooms(_ rooms: [String]) async throws -> Int {
        try await withRoomSet("add", rooms)
    }

    /// Removes a room from the fleet's room set; its owner logs out. Any thread.
    func removeRoom(_ room: String) async throws -> Bool {
        try await withRoomSet("remove", [room]) == 1
    }

    private func withRoomSet(_ op: String, _ rooms: [String]) async throws -> Int {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int, any Error>) in
            let accepted = loop.execute { [self] in
                changeRoomSet(op, rooms) { [self] result in
                    switch result {
                    case .success(let changed):
                        // Apply at once for our own shards; the stream tells the others.
                        for room in rooms {
                            let shard = fleetShard(of: room, shards: config.shards)
                            guard held[shard] != nil else { continue }
                            if op == "add" {
                                held[shard]?.rooms.insert(room)
                                logIn(room)
                            } else {
                                held[shard]?.rooms.remove(room)
                                if active[room] != nil || waiting.contains(room) { logOut(room) }
                            }
                        }
                        continuation.resume(returning: changed)
                    case .failure(let error):
                        continuation.resume(throwing: FleetError(message: "\(error)"))
                    }
                }
            }
            if !accepted { continuation.resume(throwing: FleetError(message: "host is shut down")) }
        }
    }

    /// `GET /v1/fleet`: this host, every live host, the number of rooms in
    /// the set and how many of them are in shards nobody holds. Any thread.
    func status() async throws -> JSON {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<JSON, any Error>) in
            let accepted = loop.execute { [self] in
                let local: [String: JSON] = [
                    "held": .int(Int64(held.count)), "active": .int(Int64(active.count)),
                    "waiting": .int(Int64(waiting.count)), "target": .int(Int64(target)),
                    "draining": .bool(draining), "load": .double(load),
                ]
                redis.evaluate(scripts.status, keys: [keys.lease, keys.owner, keys.hosts, keys.draining],
                               arguments: [String(config.shards)]) { [self] result in
                    guard case .success(.array(let reply)) = result, reply.count == 4 else {
                        return continuation.resume(throwing: FleetError(message: "fleet status: \(result)"))
                    }
                    let hosts = reply[1].array.map { entry -> JSON in
                        let parts = entry.array
                        var fields: [String: String] = [:]
                        let hash = parts.count == 3 ? parts[2].array : []
                        var index = 0
                        while index + 1 < hash.count {
                            if let key = hash[index].string { fields[key] = hash[index + 1].string }
                            index += 2
                        }
                        return [
                            "id": .string(parts.first?.string ?? ""),
                            "shards": .int(Int64(fields["shards"] ?? "") ?? 0),
                            "rooms": .int(Int64(fields["rooms"] ?? "") ?? 0),
                            "load": .double(Double(fields["load"] ?? "") ?? 0),
                            "draining": .bool(fields["draining"] == "1"),
                        ]
                    }
                    continuation.resume(returning: [
                        "host": .string(hostID), "hosts": .array(hosts),
                        "rooms": .int(reply[2].integer ?? 0), "unhomed": .int(reply[3].integer ?? 0),
                        "local": .object(local),
                    ])
                }
            }
            if !accepted { continuation.resume(throwing: FleetError(message: "host is shut down")) }
        }
    }

    /// Drain (SIGTERM): stop claiming, announce it, hand every shard back
    /// at `releaseBatch` per claim round (logging out of its rooms first),
    /// then leave the host list. Returns when nothing is held, when no other
    /// live host is left to take the rooms (the last host of a fleet need
    /// not wait), or after `drainTimeout`. Any thread but the loop's.
    func drain() async {
        let started = Date()
        _ = loop.execute { [self] in
            draining = true
            _ = claims.drain()
            // Only a claim round sent after this one's renew can say whether
            // anyone else serves: forget what the last one said.
            servingHosts = nil
            logger.notice("fleet: draining", metadata: ["shards": .stringConvertible(held.count), "rooms": .stringConvertible(active.count)])
            renew()
            claim()
        }
        let timeout = Double(config.drainTimeout.milliseconds) / 1000
        var alone = false
        while Date().timeIntervalSince(started) < timeout {
            let (done, nobody) = (try? await loop.submit { [self] in
                (held.isEmpty && releasing.isEmpty && !releaseInFlight && handingOver.isEmpty, servingHosts == 0)
            }) ?? (true, false)
            if done { break }
            if nobody {
                alone = true
                break
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        await withCheckedContinuation { [alone] (continuation: CheckedContinuation<Void, Never>) in
            let accepted = loop.execute { [self] in
                if alone {
                    logger.notice("fleet: no other live host can take the rooms; not waiting for the drain timeout",
                                  metadata: ["shards": .stringConvertible(held.count), "rooms": .stringConvertible(active.count)])
                } else if !held.isEmpty {
                    logger.warning("fleet: drain timed out; leaving the rest to expire", metadata: ["shards": .stringConvertible(held.count)])
                }
                redis.command(["ZREM", keys.hosts, hostID]) { [self] _ in
                    redis.command(["SREM", keys.draining, hostID]) { [self] _ in
                        redis.command(["DEL", keys.host(hostID)]) { _ in continuation.resume() }
                    }
                }
            }
            if !accepted { continuation.resume() }
        }
    }
}
