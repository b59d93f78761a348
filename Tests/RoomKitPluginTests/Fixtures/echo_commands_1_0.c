/*
 * echo-commands: answers chat commands, written in plain C against
 * roomkit_plugin.h to show that the ABI needs no Swift.
 *
 * On a magix event named "command" whose payload is "!ping" (or
 * {"text":"!ping"}), it dispatches a "reply" event with payload
 * {"text":"pong","to":<sender memberId>} into the same room. "!time" is
 * answered with the host's clock in ms. Config: {"prefix": "!"} (optional).
 */
#include "echo_commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const roomkit_host_api *host;
static char prefix[16] = "!";

/* Finds `"key":` in a flat JSON object and returns the start of its value. */
static const char *json_value(const char *json, const char *key) {
    char needle[64];
    snprintf(needle, sizeof needle, "\"%s\":", key);
    const char *at = strstr(json, needle);
    return at ? at + strlen(needle) : NULL;
}

/* True when the value at `v` is the JSON string `text` (no escapes needed). */
static int value_is(const char *v, const char *text) {
    if (!v || *v != '"') return 0;
    size_t n = strlen(text);
    return strncmp(v + 1, text, n) == 0 && v[1 + n] == '"';
}

static int on_load(void *self, const roomkit_host_api *api, const char *config_json) {
    (void)self;
    host = api;
    const char *p = config_json ? json_value(config_json, "prefix") : NULL;
    if (p && *p == '"') {
        size_t i = 0;
        for (p++; *p && *p != '"' && i + 1 < sizeof prefix; p++) prefix[i++] = *p;
        prefix[i] = '\0';
    }
    host->log(host->context, ROOMKIT_LOG_INFO, "echo-commands ready");
    return 0;
}

static void on_unload(void *self) {
    (void)self;
    host = NULL;
}

static void on_room_event(void *self, int32_t kind, const char *room, const char *payload_json) {
    (void)self;
    if (kind != ROOMKIT_ROOM_MAGIX || !host || !payload_json) return;
    if (!value_is(json_value(payload_json, "event"), "command")) return;
    const char *payload = json_value(payload_json, "payload");
    if (!payload) return;
    if (*payload == '{') payload = json_value(payload, "text");
    char ping[32], now[32];
    snprintf(ping, sizeof ping, "%sping", prefix);
    snprintf(now, sizeof now, "%stime", prefix);
    const char *from = json_value(payload_json, "from");
    long long sender = from ? atoll(from) : 0;
    char reply[128];
    if (value_is(payload, ping)) {
        snprintf(reply, sizeof reply, "{\"text\":\"pong\",\"to\":%lld}", sender);
    } else if (value_is(payload, now)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(reply, sizeof reply, "{\"text\":\"%lld\",\"to\":%lld}",
                 (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, sender);
    } else {
        return;
    }
    host->dispatch_magix(host->context, room, "reply", reply, NULL);
}

/* A reply that could not be sent (a read-only session, a rate limit)
 * comes back here, with the action's name as domain and its error code. */
static void on_error(void *self, const char *domain, int64_t code, const char *message) {
    (void)self;
    if (!host) return;
    char line[256];
    snprintf(line, sizeof line, "echo-commands: %s failed (%lld): %s", domain, (long long)code, message);
    host->log(host->context, ROOMKIT_LOG_WARNING, line);
}

static roomkit_plugin descriptor = {
    .struct_size = sizeof(roomkit_plugin),
    .abi_major = ROOMKIT_PLUGIN_ABI_MAJOR,
    .abi_minor = ROOMKIT_PLUGIN_ABI_MINOR,
    .self = NULL,
    .on_load = on_load,
    .on_unload = on_unload,
    .throw_error = on_error,
    .on_room_event = on_room_event,
};

const roomkit_plugin *roomkit_plugin_entry(uint16_t host_major, uint16_t host_minor) {
    (void)host_minor;
    return host_major == ROOMKIT_PLUGIN_ABI_MAJOR ? &descriptor : NULL;
}
