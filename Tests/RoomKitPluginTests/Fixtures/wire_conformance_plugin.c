/* The wire conformance plugin (see WireConformanceTests.swift) as a C-ABI
 * library, run by roomkit-plugin-host. */
#include "roomkit_plugin.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static const roomkit_host_api *host;
static char *kept;
static void logf_(int level, const char *a, const char *b, const char *c) {
    char line[4096];
    snprintf(line, sizeof line, "%s%s%s", a, b ? b : "", c ? c : "");
    host->log(host->context, level, line);
}
static int on_load(void *self, const roomkit_host_api *api, const char *config) {
    (void)self; host = api;
    logf_(1, "loaded ", config, NULL);
    return strstr(config, "\"failLoad\"") ? 3 : 0;
}
static void on_unload(void *self) { (void)self; logf_(1, "unloading", NULL, NULL); }
static char *url(void *self, const char *u) {
    (void)self;
    if (strstr(u, "fail")) return NULL;
    char buffer[4096];
    snprintf(buffer, sizeof buffer, "%s?via=conformance", u);
    return host->alloc_string(host->context, buffer);
}
static void room(void *self, int32_t kind, const char *r, const char *payload) {
    (void)self;
    /* A magix payload "fail": the handler fails. A C hook returns nothing, so
       it cannot say so: it makes no call, and the child reports only DONE. */
    if (kind == ROOMKIT_ROOM_MAGIX && strstr(payload, "\"payload\":\"fail\"")) return;
    if (kind == ROOMKIT_ROOM_MAGIX) { host->dispatch_magix(host->context, r, "echo", payload, NULL); return; }
    char head[64];
    snprintf(head, sizeof head, "room %d ", kind);
    logf_(1, head, r, NULL);
}
static void player(void *self, int32_t kind, const char *r, const char *payload) {
    (void)self; (void)kind; (void)payload;
    char *value = host->kv_get(host->context, r);
    logf_(1, "kv=", value ? value : "null", NULL);
    host->free_string(host->context, value);
}
static void error(void *self, const char *domain, int64_t code, const char *message) {
    (void)self;
    char line[4096];
    snprintf(line, sizeof line, "error %s %lld %s", domain, (long long)code, message);
    host->log(host->context, 2, line);
}
static void config_changed(void *self, const char *r, const char *config) {
    (void)self;
    char line[4096];
    snprintf(line, sizeof line, "config %s %s", r ? r : "null", config);
    host->log(host->context, 1, line);
}
static char *export_state(void *self) { (void)self; return kept ? host->alloc_string(host->context, kept) : NULL; }
static int import_state(void *self, const char *state) {
    (void)self;
    if (strcmp(state, "refuse") == 0) return 5;
    free(kept);
    kept = strdup(state);
    return 0;
}
ROOMKIT_DECLARE_PLUGIN(.on_load = on_load, .on_unload = on_unload, .url_interrupter = url, .on_room_event = room,
                       .on_player_event = player, .throw_error = error, .on_config_changed = config_changed,
                       .export_state = export_state, .import_state = import_state)
