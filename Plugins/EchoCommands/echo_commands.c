/*
 * echo-commands: answers chat commands, written in plain C against
 * roomkit_plugin.h to show that the ABI needs no Swift.
 *
 * On a magix event named "command" whose payload is "!ping" (or
 * {"text":"!ping"}), it dispatches a "reply" event with payload
 * {"text":"pong","to":<sender memberId>} into the same room. "!time" is
 * answered with the host's clock in ms. Config: {"prefix": "!"} (optional),
 * changeable live (on_config_changed, ABI 1.1).
 *
 * It reads payloads with roomkit_json.h (never strstr) and declares itself
 * with ROOMKIT_DECLARE_PLUGIN (ABI 1.1).
 */
#include "echo_commands.h"
#include "roomkit_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const roomkit_host_api *host;
static char prefix[16] = "!";

/* Takes "prefix" from a config object; anything else leaves it unchanged. */
static void read_config(const char *config_json) {
    char value[sizeof prefix];
    if (config_json && roomkit_json_string(config_json, "prefix", value, sizeof value) > 0) {
        memcpy(prefix, value, sizeof prefix);
    }
}

static int on_load(void *self, const roomkit_host_api *api, const char *config_json) {
    (void)self;
    host = api;
    read_config(config_json);
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
    if (!roomkit_json_string_equals(payload_json, "event", "command")) return;
    char text[64];
    if (roomkit_json_string(payload_json, "payload", text, sizeof text) < 0 &&
        roomkit_json_string(payload_json, "payload.text", text, sizeof text) < 0) return;
    char ping[32], now[32];
    snprintf(ping, sizeof ping, "%sping", prefix);
    snprintf(now, sizeof now, "%stime", prefix);
    int64_t sender = 0;
    (void)roomkit_json_int(payload_json, "from", &sender);
    char reply[128];
    if (strcmp(text, ping) == 0) {
        snprintf(reply, sizeof reply, "{\"text\":\"pong\",\"to\":%lld}", (long long)sender);
    } else if (strcmp(text, now) == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(reply, sizeof reply, "{\"text\":\"%lld\",\"to\":%lld}",
                 (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, (long long)sender);
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

/* ABI 1.1: a new prefix arrives live. The prefix is global, so only the
 * base config (room NULL) counts. */
static void on_config_changed(void *self, const char *room, const char *config_json) {
    (void)self;
    if (room == NULL) read_config(config_json);
}

ROOMKIT_DECLARE_PLUGIN(
    .on_load = on_load,
    .on_unload = on_unload,
    .throw_error = on_error,
    .on_room_event = on_room_event,
    .on_config_changed = on_config_changed,
)
