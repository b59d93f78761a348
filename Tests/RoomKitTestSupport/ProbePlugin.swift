import Foundation

/// A C plugin for tests that appends one line per room event it hears to a
/// file: `<kind> <room> <payload JSON>`. Built against ABI 1.`minor`, so a
/// test can check what a 1.0 plugin is (not) sent. After each magix event it
/// also writes `0 <room> <room_state_json>`: what the host's cache shows then.
public enum ProbePlugin {
    /// The plugin's C source, writing to `output`.
    public static func source(output: String, minor: String = "ROOMKIT_PLUGIN_ABI_MINOR") -> String {
        """
        #include "roomkit_plugin.h"
        #include <fcntl.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        #include <unistd.h>
        static const roomkit_host_api *host;
        static int on_load(void *self, const roomkit_host_api *api, const char *config) { (void)self; (void)config; host = api; return 0; }
        static void append(int32_t kind, const char *room, const char *payload) {
            size_t n = strlen(room) + strlen(payload) + 32;
            char *line = malloc(n);
            int length = snprintf(line, n, "%d %s %s\\n", kind, room, payload);
            int fd = open("\(output)", O_WRONLY | O_APPEND | O_CREAT, 0644);
            if (fd >= 0) { ssize_t w = write(fd, line, (size_t)length); (void)w; close(fd); }
            free(line);
        }
        static void on_event(void *self, int32_t kind, const char *room, const char *payload) {
            (void)self;
            append(kind, room, payload);
            if (kind == ROOMKIT_ROOM_MAGIX) {
                char *state = host->room_state_json(host->context, room);
                if (state) { append(0, room, state); host->free_string(host->context, state); }
            }
        }
        static roomkit_plugin descriptor = {
            .struct_size = sizeof(roomkit_plugin), .abi_major = ROOMKIT_PLUGIN_ABI_MAJOR, .abi_minor = \(minor),
            .on_load = on_load, .on_room_event = on_event,
        };
        const roomkit_plugin *roomkit_plugin_entry(uint16_t major, uint16_t minor) { (void)minor; return major == ROOMKIT_PLUGIN_ABI_MAJOR ? &descriptor : NULL; }
        """
    }

    /// The lines written so far, as (kind, room, payload text).
    public static func lines(_ output: String) -> [(kind: Int32, room: String, payload: String)] {
        guard let text = try? String(contentsOfFile: output, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ", maxSplits: 2)
            guard parts.count == 3, let kind = Int32(parts[0]) else { return nil }
            return (kind, String(parts[1]), String(parts[2]))
        }
    }
}
