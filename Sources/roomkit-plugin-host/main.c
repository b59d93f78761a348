/*
 * roomkit-plugin-host: runs ONE plugin in its own process for roombot
 * ("isolation": "process"). It dlopens the library and calls its hooks
 * exactly as the inline host does, through the unchanged roomkit_plugin.h;
 * every host function that acts on rooms is proxied to the bot over the
 * socket (roomkit_plugin_wire.h). Timers and alloc/free are served here:
 * they act on nothing but the plugin.
 *
 * Usage (roombot starts it; not meant for people):
 *   roomkit-plugin-host LIBRARY ENTRY HOOK-BITS MEMORY-MB CPU-SECONDS BOT-PID
 * with the socket on fd 3 and the progress page on fd 4.
 *
 * Threads: the main thread runs every hook and timer, one at a time (the
 * plugin's serial queue); a reader thread owns the socket's read side. It
 * queues hook frames for the main thread, hands replies to the thread
 * waiting for them, and exits the process when the socket closes (the bot
 * is gone), even while a hook is stuck.
 */
#define _GNU_SOURCE
#include "roomkit_plugin.h"
#include "roomkit_plugin_wire.h"
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static roomkit_wire_progress *progress;
static const roomkit_plugin *plugin;
static roomkit_host_api table;
static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;

/* Guarded by `lock`: frames for the main thread, replies, timers. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_ready = PTHREAD_COND_INITIALIZER;
static pthread_cond_t reply_ready = PTHREAD_COND_INITIALIZER;
/* Signalled when the main thread takes the inbox or a thread starts waiting for a reply. */
static pthread_cond_t drained = PTHREAD_COND_INITIALIZER;
/* Past this, the reader stops reading (the socket pushes back on the bot),
 * unless some thread waits for a reply that may be behind the queued frames. */
#define INBOX_HIGH_WATER (4u << 20)
static uint8_t *inbox;
static size_t inbox_len, inbox_cap;

typedef struct reply {
    uint64_t request;
    int done;
    int32_t result;
    char *text;
    struct reply *next;
} reply;
static reply *waiting;
static uint64_t next_request = 1;

typedef struct timer {
    uint64_t id, due_ns, repeat_ms;
    roomkit_timer_fn fire;
    void *user;
    int live;
} timer;
static timer *timers;
static size_t timer_count, timer_cap;
static uint64_t next_timer = 1;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* MARK: frames out */

typedef struct { uint8_t *bytes; size_t len, cap; } buffer;

static void put(buffer *b, const void *data, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->len + n) cap *= 2;
        b->bytes = realloc(b->bytes, cap);
        if (!b->bytes) _exit(70);
        b->cap = cap;
    }
    memcpy(b->bytes + b->len, data, n);
    b->len += n;
}
static void put_u32(buffer *b, uint32_t v) { put(b, &v, 4); }
static void put_i32(buffer *b, int32_t v) { put(b, &v, 4); }
static void put_u64(buffer *b, uint64_t v) { put(b, &v, 8); }
static void put_str(buffer *b, const char *s) {
    if (!s) { put_u32(b, ROOMKIT_WIRE_NULL); return; }
    uint32_t n = (uint32_t)strlen(s);
    put_u32(b, n);
    put(b, s, n);
}
static void begin(buffer *b, uint8_t type) {
    b->len = 0;
    put_u32(b, 0);
    put(b, &type, 1);
}

/* Sends a finished frame; a failed write means the bot is gone. */
static void send_frame(buffer *b) {
    uint32_t length = (uint32_t)(b->len - 4);
    memcpy(b->bytes, &length, 4);
    pthread_mutex_lock(&write_lock);
    size_t sent = 0;
    while (sent < b->len) {
        ssize_t n = send(ROOMKIT_WIRE_SOCKET_FD, b->bytes + sent, b->len - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) _exit(0);
        sent += (size_t)n;
    }
    pthread_mutex_unlock(&write_lock);
    free(b->bytes);
    b->bytes = NULL;
    b->cap = 0;
}

/* MARK: frames in */

typedef struct { const uint8_t *at, *end; int bad; } reader;

static void take(reader *r, void *out, size_t n) {
    if (r->bad || (size_t)(r->end - r->at) < n) { r->bad = 1; memset(out, 0, n); return; }
    memcpy(out, r->at, n);
    r->at += n;
}
static uint32_t take_u32(reader *r) { uint32_t v; take(r, &v, 4); return v; }
static int32_t take_i32(reader *r) { int32_t v; take(r, &v, 4); return v; }
static uint64_t take_u64(reader *r) { uint64_t v; take(r, &v, 8); return v; }
/* A NUL-terminated copy (malloc), or NULL for a NULL string. */
static char *take_str(reader *r) {
    uint32_t n = take_u32(r);
    if (r->bad || n == ROOMKIT_WIRE_NULL) return NULL;
    if ((size_t)(r->end - r->at) < n) { r->bad = 1; return NULL; }
    char *s = malloc((size_t)n + 1);
    if (!s) _exit(70);
    memcpy(s, r->at, n);
    s[n] = 0;
    r->at += n;
    return s;
}

/* MARK: host functions */

/* Sends a CALL and waits for its REPLY (any thread). */
static int32_t call(int32_t function, int32_t argument, int count, const char **args, char **text) {
    reply slot = {0};
    pthread_mutex_lock(&lock);
    slot.request = next_request++;
    slot.next = waiting;
    waiting = &slot;
    pthread_cond_signal(&drained);
    pthread_mutex_unlock(&lock);
    buffer b = {0};
    begin(&b, ROOMKIT_WIRE_CALL);
    put_u64(&b, slot.request);
    put_i32(&b, function);
    put_i32(&b, argument);
    put_u32(&b, (uint32_t)count);
    for (int i = 0; i < count; i++) put_str(&b, args[i]);
    send_frame(&b);
    pthread_mutex_lock(&lock);
    while (!slot.done) pthread_cond_wait(&reply_ready, &lock);
    for (reply **p = &waiting; *p; p = &(*p)->next) {
        if (*p == &slot) { *p = slot.next; break; }
    }
    pthread_mutex_unlock(&lock);
    if (text) *text = slot.text; else free(slot.text);
    return slot.result;
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
static uint64_t host_set_timer(void *c, uint64_t delay_ms, uint64_t repeat_ms, roomkit_timer_fn fire, void *user) {
    (void)c;
    if (!fire) return 0;
    pthread_mutex_lock(&lock);
    if (timer_count == timer_cap) {
        timer_cap = timer_cap ? timer_cap * 2 : 8;
        timers = realloc(timers, timer_cap * sizeof(timer));
        if (!timers) _exit(70);
    }
    uint64_t id = next_timer++;
    timers[timer_count++] = (timer){id, now_ns() + delay_ms * 1000000u, repeat_ms, fire, user, 1};
    pthread_cond_signal(&work_ready);
    pthread_mutex_unlock(&lock);
    return id;
}
static void host_cancel_timer(void *c, uint64_t id) {
    (void)c;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < timer_count; i++) if (timers[i].id == id) timers[i].live = 0;
    pthread_mutex_unlock(&lock);
}
static char *host_alloc_string(void *c, const char *text) { (void)c; return text ? strdup(text) : NULL; }
static void host_free_string(void *c, char *text) { (void)c; free(text); }

/* MARK: the reader thread */

static void *read_socket(void *unused) {
    (void)unused;
    size_t cap = 1 << 16, len = 0;
    uint8_t *buf = malloc(cap);
    if (!buf) _exit(70);
    for (;;) {
        if (len == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            if (!buf) _exit(70);
        }
        pthread_mutex_lock(&lock);
        while (inbox_len > INBOX_HIGH_WATER && !waiting) pthread_cond_wait(&drained, &lock);
        pthread_mutex_unlock(&lock);
        ssize_t n = read(ROOMKIT_WIRE_SOCKET_FD, buf + len, cap - len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) _exit(0);  /* the bot closed the socket or died */
        len += (size_t)n;
        size_t at = 0;
        int queued = 0;
        pthread_mutex_lock(&lock);
        while (len - at >= 5) {
            uint32_t length;
            memcpy(&length, buf + at, 4);
            if (length == 0 || length > ROOMKIT_WIRE_MAX_FRAME) _exit(71);
            if (len - at < 4 + (size_t)length) {
                if (4 + (size_t)length > cap) {
                    /* grow for a large frame */
                    pthread_mutex_unlock(&lock);
                    memmove(buf, buf + at, len - at);
                    len -= at;
                    at = 0;
                    while (cap < 4 + (size_t)length) cap *= 2;
                    buf = realloc(buf, cap);
                    if (!buf) _exit(70);
                    pthread_mutex_lock(&lock);
                }
                break;
            }
            const uint8_t *frame = buf + at;
            if (frame[4] == ROOMKIT_WIRE_REPLY) {
                reader r = {frame + 5, frame + 4 + length, 0};
                uint64_t request = take_u64(&r);
                int32_t result = take_i32(&r);
                char *text = take_str(&r);
                if (r.bad) _exit(71);
                for (reply *w = waiting; w; w = w->next) {
                    if (w->request == request) { w->result = result; w->text = text; w->done = 1; text = NULL; break; }
                }
                free(text);
                pthread_cond_broadcast(&reply_ready);
            } else {
                if (inbox_len + 4 + length > inbox_cap) {
                    size_t grown = inbox_cap ? inbox_cap : 1 << 16;
                    while (grown < inbox_len + 4 + length) grown *= 2;
                    inbox = realloc(inbox, grown);
                    if (!inbox) _exit(70);
                    inbox_cap = grown;
                }
                memcpy(inbox + inbox_len, frame, 4 + (size_t)length);
                inbox_len += 4 + (size_t)length;
                queued = 1;
            }
            at += 4 + (size_t)length;
        }
        if (queued) pthread_cond_signal(&work_ready);
        pthread_mutex_unlock(&lock);
        memmove(buf, buf + at, len - at);
        len -= at;
    }
    return NULL;
}

/* MARK: crash notes (async-signal-safe only) */

static uint64_t vm_peak_kb(void) {
    int fd = open("/proc/self/status", O_RDONLY);
    if (fd < 0) return 0;
    char text[4096];
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) return 0;
    text[n] = 0;
    for (char *p = text; *p; p++) {
        if ((p == text || p[-1] == '\n') && strncmp(p, "VmPeak:", 7) == 0) {
            uint64_t kb = 0;
            for (p += 7; *p == ' ' || *p == '\t'; p++) {}
            for (; *p >= '0' && *p <= '9'; p++) kb = kb * 10 + (uint64_t)(*p - '0');
            return kb;
        }
    }
    return 0;
}

static void on_fatal(int signal) {
    int saved = errno;
    if (progress) {
        roomkit_wire_store32(&progress->crash_errno, saved);
        roomkit_wire_store64(&progress->crash_vm_kb, vm_peak_kb());
    }
    /* SA_RESETHAND restored the default action: die of the same signal. */
    raise(signal);
}

static void install_crash_notes(void) {
    static char stack[64 * 1024];
    stack_t alt = {.ss_sp = stack, .ss_size = sizeof stack};
    sigaltstack(&alt, NULL);
    struct sigaction action = {0};
    action.sa_handler = on_fatal;
    action.sa_flags = SA_RESETHAND | SA_ONSTACK | SA_NODEFER;
    int fatal[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++) sigaction(fatal[i], &action, NULL);
}

/* MARK: main */

static void hello(int32_t stage, const char *message) {
    buffer b = {0};
    begin(&b, ROOMKIT_WIRE_HELLO);
    put_i32(&b, stage);
    put_str(&b, message ? message : "");
    send_frame(&b);
}

static void busy(int32_t what, uint64_t seq) {
    roomkit_wire_store64(&progress->busy_seq, seq);
    roomkit_wire_store32(&progress->busy_what, what);
    roomkit_wire_store64(&progress->busy_since_ns, what ? now_ns() : 0);
}

/* Handles one frame on the main thread; returns 0 when the process should end. */
static int handle(const uint8_t *frame, uint32_t length) {
    reader r = {frame + 5, frame + 4 + length, 0};
    void *self = plugin->self;
    switch (frame[4]) {
    case ROOMKIT_WIRE_LOAD: {
        char *config = take_str(&r);
        busy(ROOMKIT_WIRE_BUSY_LOAD, 0);
        int32_t result = plugin->on_load ? plugin->on_load(self, &table, config ? config : "null") : 0;
        busy(ROOMKIT_WIRE_IDLE, 0);
        free(config);
        buffer b = {0};
        begin(&b, ROOMKIT_WIRE_LOADED);
        put_i32(&b, result);
        send_frame(&b);
        return 1;
    }
    case ROOMKIT_WIRE_ROOM_EVENT:
    case ROOMKIT_WIRE_PLAYER_EVENT: {
        uint64_t seq = take_u64(&r);
        int32_t kind = take_i32(&r);
        char *room = take_str(&r), *payload = take_str(&r);
        if (!r.bad && room && payload) {
            busy(ROOMKIT_WIRE_BUSY_EVENT, seq);
            if (frame[4] == ROOMKIT_WIRE_ROOM_EVENT) {
                if (plugin->on_room_event) plugin->on_room_event(self, kind, room, payload);
            } else if (plugin->on_player_event) {
                plugin->on_player_event(self, kind, room, payload);
            }
            busy(ROOMKIT_WIRE_IDLE, 0);
        }
        roomkit_wire_store64(&progress->done_seq, seq);
        free(room);
        free(payload);
        return 1;
    }
    case ROOMKIT_WIRE_THROW_ERROR: {
        uint64_t seq = take_u64(&r);
        int64_t code = (int64_t)take_u64(&r);
        char *domain = take_str(&r), *message = take_str(&r);
        if (!r.bad && domain && message && plugin->throw_error) {
            busy(ROOMKIT_WIRE_BUSY_EVENT, seq);
            plugin->throw_error(self, domain, code, message);
            busy(ROOMKIT_WIRE_IDLE, 0);
        }
        roomkit_wire_store64(&progress->done_seq, seq);
        free(domain);
        free(message);
        return 1;
    }
    case ROOMKIT_WIRE_URL: {
        uint64_t request = take_u64(&r);
        char *url = take_str(&r);
        char *result = NULL;
        if (!r.bad && url && plugin->url_interrupter) {
            busy(ROOMKIT_WIRE_BUSY_URL, 0);
            result = plugin->url_interrupter(self, url);
            busy(ROOMKIT_WIRE_IDLE, 0);
        }
        buffer b = {0};
        begin(&b, ROOMKIT_WIRE_URL_REPLY);
        put_u64(&b, request);
        put_str(&b, result);
        send_frame(&b);
        free(result);  /* host->alloc_string is strdup */
        free(url);
        return 1;
    }
    case ROOMKIT_WIRE_UNLOAD: {
        busy(ROOMKIT_WIRE_BUSY_UNLOAD, 0);
        if (plugin->on_unload) plugin->on_unload(self);
        busy(ROOMKIT_WIRE_IDLE, 0);
        buffer b = {0};
        begin(&b, ROOMKIT_WIRE_UNLOADED);
        send_frame(&b);
        return 0;
    }
    default:
        _exit(71);  /* the bot sent something this host does not know */
    }
}

/* Runs the timers that are due; returns the next deadline (0: none). Called with `lock` held. */
static uint64_t run_timers(void) {
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
        pthread_mutex_unlock(&lock);
        busy(ROOMKIT_WIRE_BUSY_TIMER, 0);
        fired.fire(fired.user, fired.id);
        busy(ROOMKIT_WIRE_IDLE, 0);
        pthread_mutex_lock(&lock);
    }
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "roomkit-plugin-host is started by roombot, not by hand\n");
        return 64;
    }
    const char *library = argv[1], *entry_name = argv[2];
    unsigned hooks = (unsigned)strtoul(argv[3], NULL, 10);
    unsigned long memory_mb = strtoul(argv[4], NULL, 10), cpu_seconds = strtoul(argv[5], NULL, 10);
    pid_t bot = (pid_t)strtol(argv[6], NULL, 10);

    /* Never outlive the bot: a signal when it dies, and a check for the race. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != bot) return 0;
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);

    progress = mmap(NULL, sizeof(roomkit_wire_progress), PROT_READ | PROT_WRITE, MAP_SHARED, ROOMKIT_WIRE_PROGRESS_FD, 0);
    if (progress == MAP_FAILED) { hello(ROOMKIT_WIRE_STAGE_SETUP, "cannot map the progress page"); return 70; }
    install_crash_notes();

    pthread_t thread;
    if (pthread_create(&thread, NULL, read_socket, NULL) != 0) { hello(ROOMKIT_WIRE_STAGE_SETUP, "cannot start the reader thread"); return 70; }

    char message[1024];
    dlerror();
    void *mapping = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!mapping) {
        const char *reason = dlerror();
        snprintf(message, sizeof message, "dlopen failed: %s", reason ? reason : "unknown dlopen error");
        hello(ROOMKIT_WIRE_STAGE_DLOPEN, message);
        return 0;
    }
    void *symbol = dlsym(mapping, entry_name);
    if (!symbol) {
        snprintf(message, sizeof message, "entry symbol '%s' not found in %s", entry_name, library);
        hello(ROOMKIT_WIRE_STAGE_MISSING_ENTRY, message);
        return 0;
    }
    roomkit_plugin_entry_fn entry = (roomkit_plugin_entry_fn)symbol;
    plugin = entry(ROOMKIT_PLUGIN_ABI_MAJOR, ROOMKIT_PLUGIN_ABI_MINOR);
    if (!plugin) {
        snprintf(message, sizeof message, "the entry refused host ABI %d.%d", ROOMKIT_PLUGIN_ABI_MAJOR, ROOMKIT_PLUGIN_ABI_MINOR);
        hello(ROOMKIT_WIRE_STAGE_ENTRY_REFUSED, message);
        return 0;
    }
    size_t minimum = offsetof(roomkit_plugin, on_player_event) + sizeof(void *);
    if (plugin->abi_major != ROOMKIT_PLUGIN_ABI_MAJOR || plugin->abi_minor > ROOMKIT_PLUGIN_ABI_MINOR || plugin->struct_size < minimum) {
        snprintf(message, sizeof message, "ABI mismatch: plugin %u.%u (descriptor %u bytes), host %d.%d",
                 plugin->abi_major, plugin->abi_minor, plugin->struct_size, ROOMKIT_PLUGIN_ABI_MAJOR, ROOMKIT_PLUGIN_ABI_MINOR);
        hello(ROOMKIT_WIRE_STAGE_ABI_MISMATCH, message);
        return 0;
    }
    const char *missing = NULL;
    if ((hooks & ROOMKIT_WIRE_HOOK_PLAYER) && !plugin->on_player_event) missing = "player";
    if ((hooks & ROOMKIT_WIRE_HOOK_ROOM) && !plugin->on_room_event) missing = "room";
    if ((hooks & ROOMKIT_WIRE_HOOK_THROW_ERROR) && !plugin->throw_error) missing = "throwError";
    if ((hooks & ROOMKIT_WIRE_HOOK_URL) && !plugin->url_interrupter) missing = "urlInterrupter";
    if (missing) {
        snprintf(message, sizeof message, "declares hook '%s' but does not export it", missing);
        hello(ROOMKIT_WIRE_STAGE_HOOK_NOT_EXPORTED, message);
        return 0;
    }

    /* Limits after mapping (the loader itself needs address space), before any hook runs. */
    if (memory_mb > 0) {
        struct rlimit limit = {(rlim_t)memory_mb << 20, (rlim_t)memory_mb << 20};
        setrlimit(RLIMIT_AS, &limit);
    }
    if (cpu_seconds > 0) {
        struct rlimit limit = {(rlim_t)cpu_seconds, (rlim_t)cpu_seconds + 1};
        setrlimit(RLIMIT_CPU, &limit);
    }

    table = (roomkit_host_api){
        .struct_size = sizeof(roomkit_host_api), .abi_major = ROOMKIT_PLUGIN_ABI_MAJOR, .abi_minor = ROOMKIT_PLUGIN_ABI_MINOR,
        .context = NULL, .log = host_log, .dispatch_magix = host_dispatch_magix, .set_global_state = host_set_global_state,
        .insert_image = host_insert_image, .put_scenes = host_put_scenes, .room_state_json = host_room_state_json,
        .set_timer = host_set_timer, .cancel_timer = host_cancel_timer, .alloc_string = host_alloc_string,
        .free_string = host_free_string,
    };
    hello(ROOMKIT_WIRE_STAGE_OK, "");

    uint8_t *work = NULL;
    size_t work_cap = 0;
    for (;;) {
        pthread_mutex_lock(&lock);
        for (;;) {
            uint64_t next = run_timers();
            if (inbox_len > 0) break;
            if (next) {
                struct timespec until;
                clock_gettime(CLOCK_MONOTONIC, &until);
                uint64_t wait = next > now_ns() ? next - now_ns() : 0;
                until.tv_sec += (time_t)(wait / 1000000000u);
                until.tv_nsec += (long)(wait % 1000000000u);
                if (until.tv_nsec >= 1000000000L) { until.tv_sec += 1; until.tv_nsec -= 1000000000L; }
                pthread_cond_timedwait(&work_ready, &lock, &until);
            } else {
                pthread_cond_wait(&work_ready, &lock);
            }
        }
        /* Swap the inbox out: the reader fills a fresh one meanwhile. */
        uint8_t *batch = inbox;
        size_t batch_len = inbox_len, batch_cap = inbox_cap;
        inbox = work;
        inbox_cap = work_cap;
        inbox_len = 0;
        pthread_cond_signal(&drained);
        pthread_mutex_unlock(&lock);
        for (size_t at = 0; at < batch_len;) {
            uint32_t length;
            memcpy(&length, batch + at, 4);
            if (!handle(batch + at, length)) _exit(0);
            at += 4 + (size_t)length;
        }
        work = batch;
        work_cap = batch_cap;
    }
}
