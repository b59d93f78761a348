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
#include "host.h"
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

roomkit_wire_progress *progress;
static const roomkit_plugin *plugin;
static roomkit_host_api table;

pthread_mutex_t host_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t work_ready = PTHREAD_COND_INITIALIZER;
pthread_cond_t reply_ready = PTHREAD_COND_INITIALIZER;
pthread_cond_t drained = PTHREAD_COND_INITIALIZER;
/* Past this, the reader stops reading (the socket pushes back on the bot),
 * unless some thread waits for a reply that may be behind the queued frames. */
#define INBOX_HIGH_WATER (4u << 20)
uint8_t *inbox;
size_t inbox_len, inbox_cap;
reply *waiting;

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
        pthread_mutex_lock(&host_lock);
        while (inbox_len > INBOX_HIGH_WATER && !waiting) pthread_cond_wait(&drained, &host_lock);
        pthread_mutex_unlock(&host_lock);
        ssize_t n = read(ROOMKIT_WIRE_SOCKET_FD, buf + len, cap - len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) _exit(0);  /* the bot closed the socket or died */
        len += (size_t)n;
        size_t at = 0;
        int queued = 0;
        pthread_mutex_lock(&host_lock);
        while (len - at >= 5) {
            uint32_t length;
            memcpy(&length, buf + at, 4);
            if (length == 0 || length > ROOMKIT_WIRE_MAX_FRAME) _exit(71);
            if (len - at < 4 + (size_t)length) {
                if (4 + (size_t)length > cap) {
                    /* grow for a large frame */
                    pthread_mutex_unlock(&host_lock);
                    memmove(buf, buf + at, len - at);
                    len -= at;
                    at = 0;
                    while (cap < 4 + (size_t)length) cap *= 2;
                    buf = realloc(buf, cap);
                    if (!buf) _exit(70);
                    pthread_mutex_lock(&host_lock);
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
        pthread_mutex_unlock(&host_lock);
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

void busy(int32_t what, uint64_t seq) {
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
                /* Kinds added in a later minor reach only plugins built for it
                   (the enum only grows; a 1.0 plugin never sees resync). */
                int known = kind != ROOMKIT_ROOM_RESYNC || plugin->abi_minor >= 1;
                if (plugin->on_room_event && known) plugin->on_room_event(self, kind, room, payload);
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
    case ROOMKIT_WIRE_CONFIG_CHANGED:
    case ROOMKIT_WIRE_EXPORT_STATE:
    case ROOMKIT_WIRE_IMPORT_STATE:
        handle_abi11(plugin, frame[4], &r);
        return 1;
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
    /* A sanitizer's shadow memory needs terabytes of address space: under
       `make check-sanitizers` the address-space limit is not set (the
       memory-limit test is skipped there; ROOMKIT_SANITIZED). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ROOMKIT_SANITIZED_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ROOMKIT_SANITIZED_BUILD 1
#endif
#endif
#ifndef ROOMKIT_SANITIZED_BUILD
    if (memory_mb > 0) {
        struct rlimit limit = {(rlim_t)memory_mb << 20, (rlim_t)memory_mb << 20};
        setrlimit(RLIMIT_AS, &limit);
    }
#else
    (void)memory_mb;
#endif
    if (cpu_seconds > 0) {
        struct rlimit limit = {(rlim_t)cpu_seconds, (rlim_t)cpu_seconds + 1};
        setrlimit(RLIMIT_CPU, &limit);
    }

    table = host_api_table();
    hello(ROOMKIT_WIRE_STAGE_OK, "");

    uint8_t *work = NULL;
    size_t work_cap = 0;
    for (;;) {
        pthread_mutex_lock(&host_lock);
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
                pthread_cond_timedwait(&work_ready, &host_lock, &until);
            } else {
                pthread_cond_wait(&work_ready, &host_lock);
            }
        }
        /* Swap the inbox out: the reader fills a fresh one meanwhile. */
        uint8_t *batch = inbox;
        size_t batch_len = inbox_len, batch_cap = inbox_cap;
        inbox = work;
        inbox_cap = work_cap;
        inbox_len = 0;
        pthread_cond_signal(&drained);
        pthread_mutex_unlock(&host_lock);
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
