/// C sources of misbehaving test plugins, compiled by the tests with `cc`.
enum TestPlugins {
    /// A well-formed prefix: include, host pointer, and an entry returning `descriptor`.
    /// `onLoad` is the C expression on_load returns (it may use `config`), declared in `prelude`.
    static func plugin(hooks: String, body: String = "", major: String = "ROOMKIT_PLUGIN_ABI_MAJOR",
                       entry: String = "roomkit_plugin_entry", refuse: Bool = false,
                       prelude: String = "", onLoad: String = "0") -> String {
        """
        #include "roomkit_plugin.h"
        #include <stdlib.h>
        #include <string.h>
        #include <unistd.h>
        static const roomkit_host_api *host;
        \(prelude)
        static int on_load(void *self, const roomkit_host_api *api, const char *config) { (void)self; (void)config; host = api; return \(onLoad); }
        \(body)
        static roomkit_plugin descriptor = {
            .struct_size = sizeof(roomkit_plugin), .abi_major = \(major), .abi_minor = ROOMKIT_PLUGIN_ABI_MINOR,
            .on_load = on_load, \(hooks)
        };
        const roomkit_plugin *\(entry)(uint16_t major, uint16_t minor) { (void)major; (void)minor; return \(refuse ? "NULL" : "&descriptor"); }
        """
    }

    /// url_interrupter that never returns in time.
    static let hanging = plugin(hooks: ".url_interrupter = hang, .on_room_event = hang_event,", body: """
        static char *hang(void *self, const char *url) { (void)self; sleep(5); return host->alloc_string(host->context, url); }
        static void hang_event(void *self, int32_t kind, const char *room, const char *payload) { (void)self; (void)kind; (void)room; (void)payload; sleep(5); }
        """)

    /// url_interrupter that fails: NULL, then invalid UTF-8, alternately.
    static let failing = plugin(hooks: ".url_interrupter = fail,", body: """
        static int calls;
        static char *fail(void *self, const char *url) { (void)self; (void)url; return (calls++ % 2) ? host->alloc_string(host->context, "\\xff\\xfe") : NULL; }
        """)

    /// Declares nothing for url_interrupter although the manifest says it does.
    static let missingHook = plugin(hooks: ".on_room_event = NULL,")

    /// Built against a future major version.
    static let badABI = plugin(hooks: "", major: "2")

    /// Exports its entry under another name.
    static let wrongEntry = plugin(hooks: "", entry: "some_other_entry")

    /// Refuses the host's ABI.
    static let refusing = plugin(hooks: "", refuse: true)

    /// Appends a marker to every URL (for chain-order tests): config is the marker.
    static func marking(_ marker: String) -> String {
        plugin(hooks: ".url_interrupter = mark,", body: """
            static char *mark(void *self, const char *url) {
                (void)self; size_t n = strlen(url);
                char *buffer = malloc(n + 8); memcpy(buffer, url, n); memcpy(buffer + n, "\(marker)", strlen("\(marker)") + 1);
                char *out = host->alloc_string(host->context, buffer); free(buffer); return out;
            }
            """)
    }
}

extension TestPlugins {
    /// Records what it hears, one line per call, in the file its config names
    /// (config: a JSON string): `load`, `unload`, `error DOMAIN CODE`. Answers
    /// magix `!ping` with a `reply` (like echo-commands), and rewrites URLs by
    /// appending `marker`.
    static func recorder(marker: String = "+r") -> String {
        plugin(hooks: ".on_unload = on_unload, .throw_error = on_error, .on_room_event = on_event, .url_interrupter = mark,", body: """
            #include <stdio.h>
            static char path[1024];
            static void record(const char *line) {
                FILE *f = fopen(path, "a"); if (!f) return; fprintf(f, "%s\\n", line); fclose(f);
            }
            static int on_load2(const char *config) {
                size_t n = strlen(config);
                if (n < 2 || n - 2 >= sizeof path) return 1;
                memcpy(path, config + 1, n - 2); path[n - 2] = 0;
                record("load");
                return 0;
            }
            static void on_unload(void *self) { (void)self; record("unload"); }
            static void on_error(void *self, const char *domain, int64_t code, const char *message) {
                (void)self; (void)message; char line[256];
                snprintf(line, sizeof line, "error %s %lld", domain, (long long)code); record(line);
            }
            static void on_event(void *self, int32_t kind, const char *room, const char *payload) {
                (void)self;
                if (kind != ROOMKIT_ROOM_MAGIX || !strstr(payload, "\\"event\\":\\"command\\"") || !strstr(payload, "!ping")) return;
                host->dispatch_magix(host->context, room, "reply", "{\\"text\\":\\"pong\\"}", NULL);
            }
            static char *mark(void *self, const char *url) {
                (void)self; size_t n = strlen(url);
                char *buffer = malloc(n + 16); memcpy(buffer, url, n); memcpy(buffer + n, "\(marker)", strlen("\(marker)") + 1);
                char *out = host->alloc_string(host->context, buffer); free(buffer); return out;
            }
            """, prelude: "static int on_load2(const char *config);", onLoad: "on_load2(config)")
    }
}
