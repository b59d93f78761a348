extension Scaffold {
    /// A C plugin: ROOMKIT_DECLARE_PLUGIN, roomkit_json.h, a Makefile that
    /// finds the headers with `pkg-config roomkit-plugin` (`make install`
    /// writes roomkit-plugin.pc), and a test that loads the library with a
    /// fake host table.
    var c: [String: String] {
        [
            "plugin.c": cPlugin,
            "test_plugin.c": cTest,
            "Makefile": cMakefile,
            "plugins.json": manifest(library: "lib\(name).so"),
            "scenario.json": scenario,
            "README.md": cReadme,
            ".gitignore": "*.so\ntest_plugin\n",
        ]
    }

    private var cPlugin: String {
        #"""
        /* \#(name): a RoomKit plugin in C (roombot new-plugin). It answers the
         * magix event "ping" with "pong" {"greeting": <config greeting>, "to": <sender>}. */
        #include <roomkit_plugin.h>
        #include <roomkit_json.h>
        #include <stdio.h>
        #include <string.h>

        static const roomkit_host_api *host;

        static int on_load(void *self, const roomkit_host_api *api, const char *config_json) {
            (void)self; (void)config_json;
            host = api;
            host->log(host->context, ROOMKIT_LOG_INFO, "\#(name) loaded");
            return 0;
        }

        static void on_room_event(void *self, int32_t kind, const char *room, const char *payload) {
            (void)self;
            if (kind != ROOMKIT_ROOM_MAGIX || !roomkit_json_string_equals(payload, "event", "ping")) return;
            int64_t from = 0;
            roomkit_json_int(payload, "from", &from);
            /* The config as resolved for this room (manifest config + roomConfig, or a live change). */
            char greeting[128] = "hello", quoted[300];
            if (ROOMKIT_HAS_MEMBER(host, config_get_json)) {
                char *config = host->config_get_json(host->context, room);
                if (config) {
                    roomkit_json_string(config, "greeting", greeting, sizeof greeting);
                    host->free_string(host->context, config);
                }
            }
            if (roomkit_json_quote(greeting, quoted, sizeof quoted) < 0) return;
            char reply[400];
            snprintf(reply, sizeof reply, "{\"greeting\":%s,\"to\":%lld}", quoted, (long long)from);
            host->dispatch_magix(host->context, room, "pong", reply, NULL);
        }

        ROOMKIT_DECLARE_PLUGIN(.on_load = on_load, .on_room_event = on_room_event)

        """#
    }

    private var cTest: String {
        #"""
        /* Loads lib\#(name).so the way roombot does (dlopen + entry), hands it a
         * fake host table, and checks that a "ping" is answered with a "pong". */
        #include <roomkit_plugin.h>
        #include <roomkit_json.h>
        #include <dlfcn.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>

        static char sent_event[64], sent_payload[512];
        static int sent;

        static void fake_log(void *c, int level, const char *message) { (void)c; (void)level; (void)message; }
        static int fake_dispatch(void *c, const char *room, const char *event, const char *payload, const char *to) {
            (void)c; (void)room; (void)to;
            snprintf(sent_event, sizeof sent_event, "%s", event);
            snprintf(sent_payload, sizeof sent_payload, "%s", payload);
            sent++;
            return 0;
        }
        static char *fake_config(void *c, const char *room) { (void)c; (void)room; return strdup("{\"greeting\":\"hi there\"}"); }
        static char *fake_alloc(void *c, const char *text) { (void)c; return strdup(text); }
        static void fake_free(void *c, char *text) { (void)c; free(text); }

        static int failures;
        #define CHECK(cond) do { if (!(cond)) { failures++; fprintf(stderr, "FAIL: %s\n", #cond); } } while (0)

        int main(int argc, char **argv) {
            const char *path = argc > 1 ? argv[1] : "./lib\#(name).so";
            void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (!library) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
            roomkit_plugin_entry_fn entry = (roomkit_plugin_entry_fn)dlsym(library, ROOMKIT_PLUGIN_ENTRY_SYMBOL);
            CHECK(entry != NULL);
            if (!entry) return 1;
            const roomkit_plugin *plugin = entry(ROOMKIT_PLUGIN_ABI_MAJOR, ROOMKIT_PLUGIN_ABI_MINOR);
            CHECK(plugin != NULL && plugin->abi_major == ROOMKIT_PLUGIN_ABI_MAJOR);
            CHECK(entry(ROOMKIT_PLUGIN_ABI_MAJOR + 1, 0) == NULL);

            roomkit_host_api host = {0};
            host.struct_size = sizeof host;
            host.abi_major = ROOMKIT_PLUGIN_ABI_MAJOR;
            host.abi_minor = ROOMKIT_PLUGIN_ABI_MINOR;
            host.log = fake_log;
            host.dispatch_magix = fake_dispatch;
            host.config_get_json = fake_config;
            host.alloc_string = fake_alloc;
            host.free_string = fake_free;
            CHECK(plugin->on_load(plugin->self, &host, "{\"greeting\":\"hello\"}") == 0);

            plugin->on_room_event(plugin->self, ROOMKIT_ROOM_MAGIX, "lobby",
                                  "{\"room\":\"lobby\",\"from\":7,\"event\":\"ping\",\"payload\":null}");
            CHECK(sent == 1 && strcmp(sent_event, "pong") == 0);
            int64_t to = 0;
            CHECK(roomkit_json_int(sent_payload, "to", &to) == 0 && to == 7);
            CHECK(roomkit_json_string_equals(sent_payload, "greeting", "hi there"));

            plugin->on_room_event(plugin->self, ROOMKIT_ROOM_MAGIX, "lobby",
                                  "{\"room\":\"lobby\",\"from\":7,\"event\":\"other\",\"payload\":null}");
            CHECK(sent == 1);
            if (plugin->on_unload) plugin->on_unload(plugin->self);
            if (failures) return 1;
            printf("ok: \#(name) answers ping with pong\n");
            return 0;
        }

        """#
    }

    private var cMakefile: String {
        """
        # Builds lib\(name).so and its test. The RoomKit headers come from
        # pkg-config: `make install` of RoomKit installs roomkit-plugin.pc
        # under its PREFIX, which is where the roombot that wrote this file
        # lives, so nothing needs setting (override ROOMKIT_PREFIX to use another).
        NAME := \(name)
        LIB := lib$(NAME).so
        CFLAGS ?= -O2 -g -Wall -Wextra
        ROOMKIT_PREFIX ?= \(roombotPrefix)
        # (Set on the command itself: make before 4.4 does not export to $(shell).)
        PKG_CONFIG := PKG_CONFIG_PATH=$(ROOMKIT_PREFIX)/lib/pkgconfig$(if $(PKG_CONFIG_PATH),:$(PKG_CONFIG_PATH)) pkg-config
        ifneq ($(shell $(PKG_CONFIG) --exists roomkit-plugin && echo yes),yes)
        $(error pkg-config cannot find roomkit-plugin in $(ROOMKIT_PREFIX)/lib/pkgconfig: run `make install` of RoomKit first (it installs roomkit-plugin.pc and roombot), or set ROOMKIT_PREFIX=<its PREFIX>)
        endif
        ROOMKIT_CFLAGS := $(shell $(PKG_CONFIG) --cflags roomkit-plugin)
        # The simulator: the roombot that wrote this file (or the one on PATH).
        ROOMBOT ?= $(firstword $(wildcard \(roombotPath)) roombot)

        all: $(LIB) test

        $(LIB): plugin.c
        \t$(CC) $(CFLAGS) $(ROOMKIT_CFLAGS) -shared -fPIC -o $@ plugin.c

        test_plugin: test_plugin.c $(LIB)
        \t$(CC) $(CFLAGS) $(ROOMKIT_CFLAGS) -o $@ test_plugin.c -ldl

        # The unit test, then scenario.json in roombot's simulator (virtual time).
        test: test_plugin
        \t./test_plugin ./$(LIB)
        \t$(ROOMBOT) simulate --manifest plugins.json --script scenario.json

        clean:
        \trm -f $(LIB) test_plugin

        .PHONY: all test clean

        """
    }

    private var cReadme: String {
        """
        # \(name)

        A RoomKit plugin in C, made by `roombot new-plugin \(name) --lang c`.

        ## Build, test and load (two commands)

            make                                    # builds lib\(name).so and runs its test
            roombot check --manifest plugins.json   # loads it as the bot would

        The Makefile finds `roomkit_plugin.h` and `roomkit_json.h` through
        `pkg-config roomkit-plugin` in `\(roombotPrefix)/lib/pkgconfig` (where
        `make install` of RoomKit put them, beside the roombot that wrote this
        project; run `make install` first), and uses that roombot for the
        scenario. `make ROOMKIT_PREFIX=/opt/roomkit` picks another install.

        ## Files

        - `plugin.c`: the plugin, declared with `ROOMKIT_DECLARE_PLUGIN`; it reads
          JSON with `roomkit_json.h` (no `strstr`).
        - `test_plugin.c`: loads the library with a fake host and checks a reply.
        - `plugins.json`: the manifest that loads it.

        \(runSection)
        """
    }
}
