/*
 * host.h: what the parts of roomkit-plugin-host share (private). Each part
 * owns its state; the others reach it only through these functions.
 *   frames.c    encoding and decoding frames (docs/PLUGIN-WIRE.md), socket writes
 *   channel.c   the reader thread: the inbox of frames for the main thread,
 *               urgent frames (URL, PING) that jump it, and replies to CALLs
 *   host_api.c  the roomkit_host_api table given to the plugin, and its timers
 *   hooks.c     one frame from the bot -> the plugin's hooks; DONE frames
 *   main.c      arguments, mapping the library, HELLO, the main loop
 */
#ifndef ROOMKIT_PLUGIN_HOST_H
#define ROOMKIT_PLUGIN_HOST_H

#include "roomkit_plugin.h"
#include "roomkit_plugin_wire.h"
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

uint64_t now_ns(void);
uint64_t coarse_now_ns(void);

/* frames.c */
typedef struct { uint8_t *bytes; size_t len, cap; } buffer;
void put(buffer *b, const void *data, size_t n);
void put_u16(buffer *b, uint16_t v);
void put_u32(buffer *b, uint32_t v);
void put_i32(buffer *b, int32_t v);
void put_u64(buffer *b, uint64_t v);
void put_str(buffer *b, const char *s);
void begin(buffer *b, uint8_t type);
/* Sends a finished frame and frees it; a failed write means the bot is gone (exits). */
void send_frame(buffer *b);

typedef struct { const uint8_t *at, *end; int bad; } reader;
uint8_t take_u8(reader *r);
uint32_t take_u32(reader *r);
int32_t take_i32(reader *r);
uint64_t take_u64(reader *r);
/* A NUL-terminated copy (malloc), or NULL for a NULL string or a short frame. */
char *take_str(reader *r);
/* A str read into `scratch` (reused: no allocation per field); valid until the next read into it. */
const char *copy_str_into(const uint8_t *at, uint32_t n, buffer *scratch);

/* channel.c */
/* Starts the reader thread. */
int channel_start(void);
/* Waits until frames are queued, then hands
 * the queued frames over (*frames, *len; the caller gives back its previous
 * buffer in frames and cap to reuse). Runs `tick` (timers) while waiting:
 * it returns the next deadline. */
void channel_take(uint8_t **frames, size_t *len, size_t *cap, uint64_t (*tick)(void));
/* Whether urgent frames (URL, PING) wait; takes them like channel_take, without waiting. */
extern int channel_urgent_count;
static inline int channel_urgent_pending(void) { return __atomic_load_n(&channel_urgent_count, __ATOMIC_ACQUIRE) != 0; }
void channel_take_urgent(uint8_t **frames, size_t *len, size_t *cap);
/* Sends a CALL and waits for its REPLY (any thread); *text gets the reply's text (malloc) or NULL. */
int32_t channel_call(int32_t function, int32_t number, int count, const char **args, char **text);
/* Wakes channel_take (a timer was added). */
void channel_wake(void);
/* The lock channel_take holds while running `tick`; host_api.c's timers use it. */
void channel_lock(void);
void channel_unlock(void);

/* host_api.c */
/* The function table handed to on_load. */
roomkit_host_api host_api_table(void);
/* Runs the timers that are due; returns the next deadline (0: none). Called with the channel lock held. */
uint64_t run_timers(void);

/* hooks.c */
/* Where the plugin's calls are recorded: the shared page or a private one. */
extern roomkit_wire_progress *progress;
/* Marks the main thread busy with `what` (event `seq`), or idle (what 0). */
void busy(int32_t what, uint64_t seq);
/* Set once before the first frame: the plugin, its host table, the LOAD budget. */
void hooks_init(const roomkit_plugin *plugin, const roomkit_host_api *table);
/* Handles one frame from the bot on the main thread; returns 0 when the process should end. */
int hooks_handle(const uint8_t *frame, uint32_t length);
/* Sends DONE for the records finished since the last DONE (end of a batch). */
void hooks_flush_done(void);

#endif
