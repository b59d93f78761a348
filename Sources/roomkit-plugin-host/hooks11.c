/* roomkit-plugin-host: the ABI 1.1 plugin hooks (roomkit_plugin_wire.h
 * frames 8-10): a live config change, queued in order with the events, and
 * the reload hand-off's export/import, answered like a URL request. */
#define _GNU_SOURCE
#include "host.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void handle_abi11(const roomkit_plugin *plugin, uint8_t type, reader *r) {
    void *self = plugin->self;
    switch (type) {
    case ROOMKIT_WIRE_CONFIG_CHANGED: {
        uint64_t seq = take_u64(r);
        int32_t has_room = take_i32(r);
        char *room = take_str(r), *config = take_str(r);
        if (!r->bad && room && config && ROOMKIT_HAS_MEMBER(plugin, on_config_changed)) {
            busy(ROOMKIT_WIRE_BUSY_EVENT, seq);
            plugin->on_config_changed(self, has_room ? room : NULL, config);
            busy(ROOMKIT_WIRE_IDLE, 0);
        }
        roomkit_wire_store64(&progress->done_seq, seq);
        free(room);
        free(config);
        return;
    }
    case ROOMKIT_WIRE_EXPORT_STATE:
    case ROOMKIT_WIRE_IMPORT_STATE: {
        uint64_t request = take_u64(r);
        char *state = type == ROOMKIT_WIRE_IMPORT_STATE ? take_str(r) : NULL;
        char *result = NULL;
        char code[16];
        busy(ROOMKIT_WIRE_BUSY_URL, 0);
        if (r->bad) {
            /* nothing: a NULL reply */
        } else if (type == ROOMKIT_WIRE_EXPORT_STATE) {
            /* "S" + the state, or "N" for none: never NULL, which the bot
               could not tell from no answer yet. */
            char *state_out = ROOMKIT_HAS_MEMBER(plugin, export_state) ? plugin->export_state(self) : NULL;
            size_t n = state_out ? strlen(state_out) : 0;
            result = malloc(n + 2);
            if (result) {
                result[0] = state_out ? 'S' : 'N';
                if (state_out) memcpy(result + 1, state_out, n);
                result[n + 1] = '\0';
            }
            free(state_out);  /* host->alloc_string is strdup */
        } else {
            int rc = state && ROOMKIT_HAS_MEMBER(plugin, import_state) ? plugin->import_state(self, state) : ROOMKIT_WIRE_NO_IMPORT;
            snprintf(code, sizeof code, "%d", rc);
            result = strdup(code);
        }
        busy(ROOMKIT_WIRE_IDLE, 0);
        buffer b = {0};
        begin(&b, ROOMKIT_WIRE_URL_REPLY);
        put_u64(&b, request);
        put_str(&b, result);
        send_frame(&b);
        free(result);  /* host->alloc_string is strdup */
        free(state);
        return;
    }
    default:
        return;
    }
}
