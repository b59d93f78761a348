/*
 * roomkit-plugin-host: frames from the bot -> the plugin's hooks
 * (docs/PLUGIN-WIRE.md sections 3-9), on the main thread, one at a time:
 * LOAD, EVENTS (records in order, URL and PING served between them), URL,
 * EXPORT_STATE / IMPORT_STATE, PING, UNLOAD; DONE after each batch.
 */
#define _GNU_SOURCE
#include "host.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static roomkit_wire_progress private_page;
roomkit_wire_progress *progress = &private_page;
static const roomkit_plugin *plugin;
static const roomkit_host_api *table;
/* DONE bookkeeping: the last record finished, the last one reported, when. */
static uint64_t finished_seq, reported_seq, reported_ns, done_interval_ns = 25000000u;

void busy(int32_t what, uint64_t seq) {
    roomkit_wire_store64(&progress->busy_seq, seq);
    roomkit_wire_store32(&progress->busy_what, what);
    roomkit_wire_store64(&progress->busy_since_ns, what ? coarse_now_ns() : 0);
}

void hooks_init(const roomkit_plugin *p, const roomkit_host_api *t) {
    plugin = p;
    table = t;
}

void hooks_flush_done(void) {
    if (finished_seq == reported_seq) return;
    buffer b = {0};
    begin(&b, ROOMKIT_WIRE_DONE);
    put_u64(&b, finished_seq);
    send_frame(&b);
    reported_seq = finished_seq;
    reported_ns = coarse_now_ns();
}

static void answer(uint64_t request, int32_t result, const char *text) {
    buffer b = {0};
    begin(&b, ROOMKIT_WIRE_ANSWER);
    put_u64(&b, request);
    put_i32(&b, result);
    put_str(&b, text);
    send_frame(&b);
}

/* A record's string as a C string for the length of one call. A string
   that more of its frame follows is terminated in place: the byte after it
   (the next field's length, or the next record's type, already read or not
   yet read) is saved, set to NUL, and put back by `untie` after the call.
   The frame is the child's own memory (the inbox it took). A frame's last
   string is copied into `scratch`: its next byte is not the frame's. */
typedef struct { uint8_t *at; uint8_t saved; } tie;

static const char *terminated(const uint8_t *at, uint32_t n, const reader *r, buffer *scratch, tie *t) {
    if (!at) return NULL;
    if (at + n >= r->end) return copy_str_into(at, n, scratch);
    t->at = (uint8_t *)(uintptr_t)(at + n);
    t->saved = *t->at;
    *t->at = 0;
    return (const char *)at;
}

static void untie(tie *t) {
    if (t->at) *t->at = t->saved;
}

/* A str field at `*p` (u32 length, then the bytes) in place: NULL for a
   NULL string; 0 when it runs past `end`. */
static inline int span_at(const uint8_t **p, const uint8_t *end, const uint8_t **at, uint32_t *n) {
    if (end - *p < 4) return 0;
    memcpy(n, *p, 4);
    *p += 4;
    *at = NULL;
    if (*n == ROOMKIT_WIRE_NULL) return 1;
    if ((size_t)(end - *p) < *n) return 0;
    *at = *p;
    *p += *n;
    return 1;
}

/* One EVENTS record; 0 when it does not parse. Its fields are read in
   place (one bounds check per part, no call per field: the parse was half
   of this thread's time). Its strings are passed in place (`terminated`),
   or copied into a kept buffer: no allocation per record, and a hook's
   strings are valid for the call only (roomkit_plugin.h). */
static int record(reader *r) {
    static buffer scratch_a, scratch_b;
    const uint8_t *p = r->at;
    if (r->bad || r->end - p < 17) return r->bad = 1, 0;
    uint8_t type = p[0];
    uint64_t seq;
    int64_t number;
    memcpy(&seq, p + 1, 8);
    memcpy(&number, p + 9, 8);
    p += 17;
    const uint8_t *at_a, *at_b;
    uint32_t n_a, n_b;
    if (!span_at(&p, r->end, &at_a, &n_a) || !span_at(&p, r->end, &at_b, &n_b)) return r->bad = 1, 0;
    r->at = p;
    /* Both fields are read before either is terminated (a's NUL lands on b's length). */
    tie tie_a = {0}, tie_b = {0};
    const char *a = terminated(at_a, n_a, r, &scratch_a, &tie_a), *b = terminated(at_b, n_b, r, &scratch_b, &tie_b);
    void *self = plugin->self;
    busy(ROOMKIT_WIRE_BUSY_EVENT, seq);
    switch (type) {
    case ROOMKIT_WIRE_RECORD_ROOM:
        /* Kinds added in a later minor reach only plugins built for it
           (the enum only grows; a 1.0 plugin never sees resync). */
        if (plugin->on_room_event && a && b && (number != ROOMKIT_ROOM_RESYNC || plugin->abi_minor >= 1))
            plugin->on_room_event(self, (int32_t)number, a, b);
        break;
    case ROOMKIT_WIRE_RECORD_PLAYER:
        if (plugin->on_player_event && a && b) plugin->on_player_event(self, (int32_t)number, a, b);
        break;
    case ROOMKIT_WIRE_RECORD_THROW_ERROR:
        if (plugin->throw_error && a && b) plugin->throw_error(self, a, number, b);
        break;
    case ROOMKIT_WIRE_RECORD_CONFIG_CHANGED:
        if (ROOMKIT_HAS_MEMBER(plugin, on_config_changed) && b) plugin->on_config_changed(self, a, b);
        break;
    default:
        untie(&tie_b);
        untie(&tie_a);
        return 0;
    }
    untie(&tie_b);
    untie(&tie_a);
    busy(ROOMKIT_WIRE_IDLE, 0);
    roomkit_wire_store64(&progress->done_seq, seq);
    finished_seq = seq;
    return 1;
}

/* Serves URL and PING frames that arrived while records were being handled. */
static void serve_urgent(void) {
    static uint8_t *frames;
    static size_t cap;
    size_t len = 0;
    channel_take_urgent(&frames, &len, &cap);
    for (size_t at = 0; at < len;) {
        uint32_t length;
        memcpy(&length, frames + at, 4);
        if (!hooks_handle(frames + at, length)) _exit(0);
        at += 4 + (size_t)length;
    }
}

int hooks_handle(const uint8_t *frame, uint32_t length) {
    reader r = {frame + 5, frame + 4 + length, 0};
    void *self = plugin->self;
    switch (frame[4]) {
    case ROOMKIT_WIRE_LOAD: {
        uint32_t timeout_ms = take_u32(&r);
        char *config = take_str(&r);
        if (r.bad || r.at != r.end) _exit(71);
        /* DONE at least every half timeout_ms while busy (PLUGIN-WIRE.md 8.1): the bot judges a record late after timeout_ms without one. */
        if (timeout_ms > 0) done_interval_ns = (uint64_t)timeout_ms * 500000u;
        busy(ROOMKIT_WIRE_BUSY_LOAD, 0);
        int32_t result = plugin->on_load ? plugin->on_load(self, table, config ? config : "null") : 0;
        busy(ROOMKIT_WIRE_IDLE, 0);
        free(config);
        buffer b = {0};
        begin(&b, ROOMKIT_WIRE_LOADED);
        put_i32(&b, result);
        send_frame(&b);
        return 1;
    }
    case ROOMKIT_WIRE_EVENTS: {
        uint32_t count = take_u32(&r);
        for (uint32_t i = 0; i < count; i++) {
            if (!record(&r)) _exit(71);
            if (channel_urgent_pending()) serve_urgent();
            /* The clock every 64 records: a record's own stamp is in busy(). */
            if ((i & 63) == 63 && coarse_now_ns() - reported_ns > done_interval_ns) hooks_flush_done();
        }
        if (r.bad || r.at != r.end) _exit(71);
        return 1;
    }
    case ROOMKIT_WIRE_URL: {
        uint64_t request = take_u64(&r);
        (void)take_u32(&r); /* deadline_us: the bot enforces it */
        char *url = take_str(&r);
        if (r.bad || r.at != r.end) _exit(71);
        char *result = NULL;
        if (url && plugin->url_interrupter) {
            busy(ROOMKIT_WIRE_BUSY_URL, 0);
            result = plugin->url_interrupter(self, url);
            busy(ROOMKIT_WIRE_IDLE, 0);
        }
        answer(request, result ? 0 : -1, result);
        free(result); /* host->alloc_string is strdup */
        free(url);
        return 1;
    }
    case ROOMKIT_WIRE_EXPORT_STATE: {
        uint64_t request = take_u64(&r);
        if (r.bad || r.at != r.end) _exit(71);
        busy(ROOMKIT_WIRE_BUSY_URL, 0);
        char *state = ROOMKIT_HAS_MEMBER(plugin, export_state) ? plugin->export_state(self) : NULL;
        busy(ROOMKIT_WIRE_IDLE, 0);
        answer(request, 0, state);
        free(state);
        return 1;
    }
    case ROOMKIT_WIRE_IMPORT_STATE: {
        uint64_t request = take_u64(&r);
        char *state = take_str(&r);
        if (r.bad || r.at != r.end) _exit(71);
        busy(ROOMKIT_WIRE_BUSY_URL, 0);
        int32_t rc = state && ROOMKIT_HAS_MEMBER(plugin, import_state) ? plugin->import_state(self, state) : ROOMKIT_WIRE_NO_IMPORT;
        busy(ROOMKIT_WIRE_IDLE, 0);
        answer(request, rc, NULL);
        free(state);
        return 1;
    }
    case ROOMKIT_WIRE_PING: {
        uint64_t nonce = take_u64(&r);
        if (r.bad || r.at != r.end) _exit(71);
        buffer b = {0};
        begin(&b, ROOMKIT_WIRE_PONG);
        put_u64(&b, nonce);
        send_frame(&b);
        return 1;
    }
    case ROOMKIT_WIRE_UNLOAD: {
        if (r.at != r.end) _exit(71);
        hooks_flush_done();
        busy(ROOMKIT_WIRE_BUSY_UNLOAD, 0);
        if (plugin->on_unload) plugin->on_unload(self);
        busy(ROOMKIT_WIRE_IDLE, 0);
        buffer b = {0};
        begin(&b, ROOMKIT_WIRE_UNLOADED);
        send_frame(&b);
        return 0;
    }
    default:
        _exit(71); /* a frame this child does not know: a bad frame */
    }
}
