/*
 * host.h: what the parts of roomkit-plugin-host share (private).
 *   frames.c    frames out and in (roomkit_plugin_wire.h), the socket writes
 *   host_api.c  the roomkit_host_api table given to the plugin, timers
 *   hooks11.c   the ABI 1.1 hooks: live config, reload hand-off
 *   main.c      mapping, the reader thread, crash notes, the hook loop
 */
#ifndef ROOMKIT_PLUGIN_HOST_H
#define ROOMKIT_PLUGIN_HOST_H

#include "roomkit_plugin.h"
#include "roomkit_plugin_wire.h"
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Guarded by `host_lock`: frames for the main thread, replies awaited, timers. */
extern pthread_mutex_t host_lock;
extern pthread_cond_t work_ready;   /* the inbox got frames, or a timer was added */
extern pthread_cond_t reply_ready;  /* a reply arrived */
extern pthread_cond_t drained;      /* the inbox was taken, or a thread awaits a reply */
extern uint8_t *inbox;
extern size_t inbox_len, inbox_cap;

typedef struct reply {
    uint64_t request;
    int done;
    int32_t result;
    char *text;
    struct reply *next;
} reply;
extern reply *waiting;

extern roomkit_wire_progress *progress;

uint64_t now_ns(void);
/* Marks the main thread busy with `what` (event `seq`), or idle (what 0). */
void busy(int32_t what, uint64_t seq);

/* frames.c */
typedef struct { uint8_t *bytes; size_t len, cap; } buffer;
void put(buffer *b, const void *data, size_t n);
void put_u32(buffer *b, uint32_t v);
void put_i32(buffer *b, int32_t v);
void put_u64(buffer *b, uint64_t v);
void put_str(buffer *b, const char *s);
void begin(buffer *b, uint8_t type);
/* Sends a finished frame and frees it; a failed write means the bot is gone (exits). */
void send_frame(buffer *b);

typedef struct { const uint8_t *at, *end; int bad; } reader;
uint32_t take_u32(reader *r);
int32_t take_i32(reader *r);
uint64_t take_u64(reader *r);
/* A NUL-terminated copy (malloc), or NULL for a NULL string or a short frame. */
char *take_str(reader *r);

/* host_api.c */
/* The function table handed to on_load. */
roomkit_host_api host_api_table(void);
/* Runs the timers that are due; returns the next deadline (0: none). Called with host_lock held. */
uint64_t run_timers(void);

/* hooks11.c */
/* Handles a CONFIG_CHANGED, EXPORT_STATE or IMPORT_STATE frame (main thread). */
void handle_abi11(const roomkit_plugin *plugin, uint8_t type, reader *r);

#endif
