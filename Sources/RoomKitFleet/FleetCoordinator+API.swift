import Foundation
import RoomKit
import RoomKitLoop
import RoomKitProtocol
import RoomKitRedis

/// A fleet operation that could not be done (Redis unavailable, bad input).
public struct FleetError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public let message: String
    /// The message.
    public var description: String { message }
}

extension FleetCoordinator {
    /// Adds rooms to the fleet's room set; the owner of each room's shard
    /// joins it within a claim interval. Returns how many were new. Any thread.
    public func addRooms(_ rooms: [String]) async throws -> Int {
        try await withRoomSet("add", rooms)
    }

    /// Removes a room from the fleet's room set; its owner logs out. Any thread.
    public func removeRoom(_ room: String) async throws -> Bool {
        try await withRoomSet("remove", [room]) == 1
    }

    private func withRoomSet(_ op: String, _ rooms: [String]) async throws -> Int {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int, any Error>) in
            let accepted = loop.execute { [self] in
                changeRoomSet(op, rooms) { [self] result in
                    switch result {
                    case .success(let changed):
                        // Apply at once for our own shards; the stream tells the others.
                        for room in rooms { apply(op, room: room) }
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
    public func status() async throws -> JSON {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<JSON, any Error>) in
            let accepted = loop.execute { [self] in
                let current = state.value
                let local: [String: JSON] = [
                    "held": .int(Int64(current.machine.leases.held.count)), "active": .int(Int64(current.active.count)),
                    "waiting": .int(Int64(current.waiting.count)), "target": .int(Int64(current.machine.leases.target)),
                    "draining": .bool(current.machine.isDraining), "load": .double(current.load),
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
    public func drain() async {
        let started = Date()
        _ = loop.execute { [self] in
            switch state.value.machine.drain(now: loop.nowMilliseconds) {
            case .none:
                break
            case .startDraining(let held):
                logger.notice("fleet: draining", metadata: ["shards": .stringConvertible(held),
                                                            "rooms": .stringConvertible(state.value.active.count)])
                renew()
                claim()
            }
        }
        let timeout = Double(config.drainTimeout.milliseconds) / 1000
        var alone = false
        while Date().timeIntervalSince(started) < timeout {
            let progress = (try? await loop.submit { [self] in
                state.value.machine.drainProgress(handingOver: !state.value.handingOver.isEmpty)
            }) ?? .done
            switch progress {
            case .done:
                break
            case .alone:
                alone = true
            case .pending:
                try? await Task.sleep(for: .milliseconds(50))
                continue
            }
            break
        }
        await withCheckedContinuation { [alone] (continuation: CheckedContinuation<Void, Never>) in
            let accepted = loop.execute { [self] in
                let held = state.value.machine.leases.held.count
                if alone {
                    logger.notice("fleet: no other live host can take the rooms; not waiting for the drain timeout",
                                  metadata: ["shards": .stringConvertible(held), "rooms": .stringConvertible(state.value.active.count)])
                } else if held > 0 {
                    logger.warning("fleet: drain timed out; leaving the rest to expire", metadata: ["shards": .stringConvertible(held)])
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
