/* roomkit-plugin-host: the host function table given to the plugin.
 * Room actions, logs and room state go to the bot as CALL frames
 * (docs/PLUGIN-WIRE.md section 6; the C ABI's int result needs the REPLY);
 * timers and string memory are served here (section 6.3). */
#define _GNU_SOURCE
#include "host.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


typedef struct timer {
    uint64_t id, due_ns, repeat_ms;
    roomkit_timer_fn fire;
    void *user;
    int live;
} timer;
static timer *timers;
static size_t timer_count, timer_cap;
static uint64_t next_timer = 1;

/* MARK: host functions */

static int32_t call(int32_t function, int32_t number, int count, const char **args, char **text) {
    return channel_call(function, number, count, args, text);
}

static void host_log(void *context, int level, const char *message) {
    (void)context;
    if (!message) return;
    buffer b = {0};
    begin(&b, ROOMKIT_WIRE_LOG);
    put_i32(&b, level);
    put_str(&b, message);
    send_frame(&b);
}
static int host_dispatch_magix(void *c, const char *room, const char *event, const char *payload, const char *to) {
    (void)c;
    if (!room || !event || !payload) return -1;
    const char *args[] = {room, event, payload, to};
    return call(ROOMKIT_WIRE_DISPATCH_MAGIX, 0, 4, args, NULL);
}
static int host_set_global_state(void *c, const char *room, const char *patch) {
    (void)c;
    if (!room || !patch) return -1;
    const char *args[] = {room, patch};
    return call(ROOMKIT_WIRE_SET_GLOBAL_STATE, 0, 2, args, NULL);
}
static int host_insert_image(void *c, const char *room, const char *image) {
    (void)c;
    if (!room || !image) return -1;
    const char *args[] = {room, image};
    return call(ROOMKIT_WIRE_INSERT_IMAGE, 0, 2, args, NULL);
}
static int host_put_scenes(void *c, const char *room, const char *dir, const char *scenes, int32_t index) {
    (void)c;
    if (!room || !dir || !scenes) return -1;
    const char *args[] = {room, dir, scenes};
    return call(ROOMKIT_WIRE_PUT_SCENES, index, 3, args, NULL);
}
static char *host_room_state_json(void *c, const char *room) {
    (void)c;
    if (!room) return NULL;
    const char *args[] = {room};
    char *text = NULL;
    call(ROOMKIT_WIRE_ROOM_STATE, 0, 1, args, &text);
    return text;
}
/* The longest timer delay or period, as the bot's own (PluginRuntime.maxTimerMilliseconds):
 * 10^12 ms, about 31 years. A plugin's numbers are outside input: without the clamp,
 * UINT64_MAX ms times 10^6 wrapped round, and such a timer was due at once (a period
 * of it fired in a busy loop that starved every other timer). */
#define MAX_TIMER_MS 1000000000000ull
static uint64_t clamp_ms(uint64_t ms) { return ms > MAX_TIMER_MS ? MAX_TIMER_MS : ms; }

static uint64_t host_set_timer(void *c, uint64_t delay_ms, uint64_t repeat_ms, roomkit_timer_fn fire, void *user) {
    (void)c;
    if (!fire) return 0;
    delay_ms = clamp_ms(delay_ms);
    repeat_ms = clamp_ms(repeat_ms);
    channel_lock();
    if (timer_count == timer_cap) {
        timer_cap = timer_cap ? timer_cap * 2 : 8;
        timers = realloc(timers, timer_cap * sizeof(timer));
        if (!timers) _exit(70);
    }
    uint64_t id = next_timer++;
    timers[timer_count++] = (timer){id, now_ns() + delay_ms * 1000000u, repeat_ms, fire, user, 1};
    channel_wake();
    channel_unlock();
    return id;
}
static void host_cancel_timer(void *c, uint64_t id) {
    (void)c;
    channel_lock();
    for (size_t i = 0; i < timer_count; i++) if (timers[i].id == id) timers[i].live = 0;
    channel_unlock();
}
static char *host_alloc_string(void *c, const char *text) { (void)c; return text ? strdup(text) : NULL; }
static void host_free_string(void *c, char *text) { (void)c; free(text); }

/* MARK: ABI 1.1 host functions, proxied like the 1.0 ones */

static int call_n(int32_t function, int count, const char **args) { return call(function, 0, count, args, NULL); }
static char *call_text(int32_t function, int count, const char **args) {
    char *text = NULL;
    call(function, 0, count, args, &text);
    return text;
}
static int host_set_member_state(void *c, const char *room, const char *patch) {
    (void)c; if (!room || !patch) return -1;
    const char *args[] = {room, patch}; return call_n(ROOMKIT_WIRE_SET_MEMBER_STATE, 2, args);
}
static int host_set_extra_info(void *c, const char *room, const char *key, const char *value) {
    (void)c; if (!room || !key || !value) return -1;
    const char *args[] = {room, key, value}; return call_n(ROOMKIT_WIRE_SET_EXTRA_INFO, 3, args);
}
static int host_publish_stream(void *c, const char *room, const char *stream, const char *extra) {
    (void)c; if (!room || !stream) return -1;
    const char *args[] = {room, stream, extra}; return call_n(ROOMKIT_WIRE_PUBLISH_STREAM, 3, args);
}
static int host_unpublish_stream(void *c, const char *room, const char *stream) {
    (void)c; if (!room || !stream) return -1;
    const char *args[] = {room, stream}; return call_n(ROOMKIT_WIRE_UNPUBLISH_STREAM, 2, args);
}
static int host_login_room(void *c, const char *room) {
    (void)c; if (!room) return -1;
    const char *args[] = {room}; return call_n(ROOMKIT_WIRE_LOGIN_ROOM, 1, args);
}
static int host_logout_room(void *c, const char *room) {
    (void)c; if (!room) return -1;
    const char *args[] = {room}; return call_n(ROOMKIT_WIRE_LOGOUT_ROOM, 1, args);
}
static int host_switch_room(void *c, const char *from, const char *to) {
    (void)c; if (!from || !to) return -1;
    const char *args[] = {from, to}; return call_n(ROOMKIT_WIRE_SWITCH_ROOM, 2, args);
}
static char *host_room_members_json(void *c, const char *room) {
    (void)c; if (!room) return NULL;
    const char *args[] = {room}; return call_text(ROOMKIT_WIRE_ROOM_MEMBERS, 1, args);
}
static char *host_config_get_json(void *c, const char *room) {
    (void)c;
    const char *args[] = {room}; return call_text(ROOMKIT_WIRE_CONFIG_GET, 1, args);
}
static char *host_kv_get(void *c, const char *key) {
    (void)c; if (!key) return NULL;
    const char *args[] = {key}; return call_text(ROOMKIT_WIRE_KV_GET, 1, args);
}
static int host_kv_set(void *c, const char *key, const char *value) {
    (void)c; if (!key || !value) return -1;
    const char *args[] = {key, value}; return call_n(ROOMKIT_WIRE_KV_SET, 2, args);
}
static int host_kv_delete(void *c, const char *key) {
    (void)c; if (!key) return -1;
    const char *args[] = {key}; return call_n(ROOMKIT_WIRE_KV_DELETE, 1, args);
}
static char *host_kv_scan_json(void *c, const char *prefix) {
    (void)c;
    const char *args[] = {prefix ? prefix : ""}; return call_text(ROOMKIT_WIRE_KV_SCAN, 1, args);
}

roomkit_host_api host_api_table(void) {
    return (roomkit_host_api){
        .struct_size = sizeof(roomkit_host_api), .abi_major = ROOMKIT_PLUGIN_ABI_MAJOR, .abi_minor = ROOMKIT_PLUGIN_ABI_MINOR,
        .context = NULL, .log = host_log, .dispatch_magix = host_dispatch_magix, .set_global_state = host_set_global_state,
        .insert_image = host_insert_image, .put_scenes = host_put_scenes, .room_state_json = host_room_state_json,
        .set_timer = host_set_timer, .cancel_timer = host_cancel_timer, .alloc_string = host_alloc_string,
        .free_string = host_free_string,
        .set_member_state = host_set_member_state, .set_extra_info = host_set_extra_info,
        .publish_stream = host_publish_stream, .unpublish_stream = host_unpublish_stream,
        .login_room = host_login_room, .logout_room = host_logout_room, .switch_room = host_switch_room,
        .room_members_json = host_room_members_json, .config_get_json = host_config_get_json,
        .kv_get = host_kv_get, .kv_set = host_kv_set, .kv_delete = host_kv_delete, .kv_scan_json = host_kv_scan_json,
    };
}

uint64_t run_timers(void) {
    for (;;) {
        uint64_t now = now_ns(), next = 0;
        timer *due = NULL;
        size_t kept = 0;
        for (size_t i = 0; i < timer_count; i++) {
            if (!timers[i].live) continue;
            timers[kept++] = timers[i];
        }
        timer_count = kept;
        for (size_t i = 0; i < timer_count; i++) {
            if (timers[i].due_ns <= now) { due = &timers[i]; break; }
            if (!next || timers[i].due_ns < next) next = timers[i].due_ns;
        }
        if (!due) return next;
        timer fired = *due;
        if (fired.repeat_ms) due->due_ns = now + fired.repeat_ms * 1000000u; else due->live = 0;
        channel_unlock();
        busy(ROOMKIT_WIRE_BUSY_TIMER, 0);
        fired.fire(fired.user, fired.id);
        busy(ROOMKIT_WIRE_IDLE, 0);
        channel_lock();
    }
}

