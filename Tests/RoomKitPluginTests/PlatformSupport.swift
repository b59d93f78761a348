import Foundation
import RoomKitProtocol
import XCTest

/// Paths and a C compiler for the ABI 1.1 tests.
enum Platform {
    static let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let include = repo.appendingPathComponent("Sources/CRoomKitPluginABI/include").path
    static let fixtures = repo.appendingPathComponent("Tests/RoomKitPluginTests/Fixtures").path

    /// Runs `cc` with `arguments`; skips the test when there is no C compiler.
    @discardableResult
    static func cc(_ arguments: [String]) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["cc"] + arguments
        let output = Pipe()
        process.standardError = output
        process.standardOutput = output
        do { try process.run() } catch { throw XCTSkip("no C compiler: \(error)") }
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, text)
    }

    /// Compiles a plugin from `source` against the headers in `include`
    /// (the current ones by default), with `defines` (`-D`).
    static func plugin(_ name: String, source: String, in directory: String, include: String = include,
                       defines: [String] = []) throws -> String {
        let sourcePath = directory + "/\(name).c"
        let library = directory + "/lib\(name).so"
        try source.write(toFile: sourcePath, atomically: true, encoding: .utf8)
        let (status, errors) = try cc(["-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-I", include]
                                      + defines.map { "-D\($0)" } + [sourcePath, "-o", library])
        guard status == 0 else { throw XCTSkip("cc failed for \(name): \(errors)") }
        return library
    }

    /// Runs an executable and returns its status and output.
    static func run(_ path: String) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, text)
    }

    /// An ABI 1.1 plugin written with ROOMKIT_DECLARE_PLUGIN and roomkit_json.h
    /// that exercises the 1.1 host functions on magix commands and answers
    /// with magix events: `tick` counts, `count?` -> `count {"n"}`, `config?`
    /// -> `config {"config"}` (config_get_json for the room), `kv` {op, key,
    /// value, prefix} -> `kv {"rc"|"value"|"pairs"}`, `members?` -> `members`,
    /// `extra` -> set_extra_info(bot=hi), `member` -> set_member_state. Hands
    /// its count over on reload; built with -DREFUSE_IMPORT its import_state
    /// refuses.
    static let probe = #"""
        #include "roomkit_plugin.h"
        #include "roomkit_json.h"
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>

        static const roomkit_host_api *host;
        static long long count;

        static int on_load(void *self, const roomkit_host_api *api, const char *config) {
            (void)self; (void)config; host = api;
            return ROOMKIT_HAS_MEMBER(api, kv_scan_json) ? 0 : 1;
        }
        static void reply(const char *room, const char *event, const char *json) {
            host->dispatch_magix(host->context, room, event, json, NULL);
        }
        static void on_event(void *self, int32_t kind, const char *room, const char *payload) {
            (void)self;
            if (kind != ROOMKIT_ROOM_MAGIX) return;
            char ev[32], out[4096];
            if (roomkit_json_string(payload, "event", ev, sizeof ev) < 0) return;
            if (!strcmp(ev, "tick")) { count++; return; }
            if (!strcmp(ev, "count?")) { snprintf(out, sizeof out, "{\"n\":%lld}", count); reply(room, "count", out); return; }
            if (!strcmp(ev, "config?")) {
                char *c = host->config_get_json(host->context, room);
                snprintf(out, sizeof out, "{\"config\":%s}", c ? c : "null");
                if (c) host->free_string(host->context, c);
                reply(room, "config", out); return;
            }
            if (!strcmp(ev, "members?")) {
                char *m = host->room_members_json(host->context, room);
                snprintf(out, sizeof out, "{\"members\":%s}", m ? m : "null");
                if (m) host->free_string(host->context, m);
                reply(room, "members", out); return;
            }
            if (!strcmp(ev, "extra")) { host->set_extra_info(host->context, room, "bot", "hi"); return; }
            if (!strcmp(ev, "member")) { host->set_member_state(host->context, room, "{\"mood\":\"busy\"}"); return; }
            if (!strcmp(ev, "room")) {
                /* payload {"op": "login"|"logout"|"switch"|"publish"|"unpublish", "room", "to", "stream"}: reply "room" {"rc"} */
                char op[16] = "", target[64] = "", to[64] = "", stream[64] = "";
                roomkit_json_string(payload, "payload.op", op, sizeof op);
                roomkit_json_string(payload, "payload.room", target, sizeof target);
                roomkit_json_string(payload, "payload.to", to, sizeof to);
                roomkit_json_string(payload, "payload.stream", stream, sizeof stream);
                int rc = -9;
                if (!strcmp(op, "login")) rc = host->login_room(host->context, target);
                else if (!strcmp(op, "logout")) rc = host->logout_room(host->context, target);
                else if (!strcmp(op, "switch")) rc = host->switch_room(host->context, target, to);
                else if (!strcmp(op, "publish")) rc = host->publish_stream(host->context, room, stream, "cam");
                else if (!strcmp(op, "unpublish")) rc = host->unpublish_stream(host->context, room, stream);
                snprintf(out, sizeof out, "{\"rc\":%d}", rc);
                reply(room, "room", out); return;
            }
            if (!strcmp(ev, "kv")) {
                char op[16] = "", key[256] = "", value[2048] = "", prefix[64] = "";
                roomkit_json_string(payload, "payload.op", op, sizeof op);
                roomkit_json_string(payload, "payload.key", key, sizeof key);
                roomkit_json_string(payload, "payload.value", value, sizeof value);
                roomkit_json_string(payload, "payload.prefix", prefix, sizeof prefix);
                if (!strcmp(op, "set")) {
                    snprintf(out, sizeof out, "{\"rc\":%d}", host->kv_set(host->context, key, value));
                } else if (!strcmp(op, "get")) {
                    char *v = host->kv_get(host->context, key);
                    char quoted[2100] = "null";
                    if (v) { roomkit_json_quote(v, quoted, sizeof quoted); host->free_string(host->context, v); }
                    snprintf(out, sizeof out, "{\"value\":%s}", quoted);
                } else if (!strcmp(op, "delete")) {
                    snprintf(out, sizeof out, "{\"rc\":%d}", host->kv_delete(host->context, key));
                } else {
                    char *pairs = host->kv_scan_json(host->context, prefix);
                    snprintf(out, sizeof out, "{\"pairs\":%s}", pairs ? pairs : "null");
                    if (pairs) host->free_string(host->context, pairs);
                }
                reply(room, "kv", out);
            }
        }
        static void on_config_changed(void *self, const char *room, const char *config) {
            (void)self;
            if (!room) return;
            char out[4096];
            snprintf(out, sizeof out, "{\"config\":%s}", config);
            reply(room, "configChanged", out);
        }
        static char *export_state(void *self) {
            (void)self; char text[32];
            snprintf(text, sizeof text, "%lld", count);
            return host->alloc_string(host->context, text);
        }
        static int import_state(void *self, const char *state) {
            (void)self;
        #ifdef REFUSE_IMPORT
            (void)state; return 7;
        #else
            count = atoll(state); return 0;
        #endif
        }

        ROOMKIT_DECLARE_PLUGIN(.on_load = on_load, .on_room_event = on_event, .on_config_changed = on_config_changed,
                               .export_state = export_state, .import_state = import_state)
        """#
}

/// XCTAssertEqual for a value already computed (its arguments may be `await`ed,
/// which XCTAssertEqual's autoclosures do not allow).
func same(_ value: JSON?, _ expected: JSON?, file: StaticString = #filePath, line: UInt = #line) {
    XCTAssertEqual(value, expected, file: file, line: line)
}
