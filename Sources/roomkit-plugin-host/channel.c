/*
 * roomkit-plugin-host: the channel to the bot (docs/PLUGIN-WIRE.md).
 * A reader thread owns the socket's read side. It queues frames for the main
 * thread (the inbox), puts URL and PING frames in a separate urgent queue
 * that the main thread serves between records, hands REPLY frames to the
 * thread waiting for them, and exits the process when the socket closes
 * (the bot is gone), even while a hook is stuck.
 */
#define _GNU_SOURCE
#include "host.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct reply {
    uint64_t request;
    int done;
    int32_t result;
    char *text;
    struct reply *next;
} reply;

typedef struct { uint8_t *bytes; size_t len, cap; } queue;

/* Guarded by `lock`. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_ready = PTHREAD_COND_INITIALIZER;  /* frames queued, or a timer added */
static pthread_cond_t reply_ready = PTHREAD_COND_INITIALIZER; /* a reply arrived */
static pthread_cond_t drained = PTHREAD_COND_INITIALIZER;     /* the inbox was taken, or a thread awaits a reply */
static queue inbox, urgent;
static reply *waiting;
static uint64_t next_request = 1;
/* Read without the lock between records (a hint; the take is locked):
   channel_urgent_pending, inline in host.h. */
int channel_urgent_count;

/* Past this, the reader stops reading (the socket pushes back on the bot),
 * unless some thread waits for a reply that may be behind the queued frames. */
#define INBOX_HIGH_WATER (4u << 20)

void channel_lock(void) { pthread_mutex_lock(&lock); }
void channel_unlock(void) { pthread_mutex_unlock(&lock); }
void channel_wake(void) { pthread_cond_signal(&work_ready); }

static void enqueue(queue *q, const uint8_t *frame, size_t n) {
    if (q->len + n > q->cap) {
        size_t grown = q->cap ? q->cap : 1 << 16;
        while (grown < q->len + n) grown *= 2;
        q->bytes = realloc(q->bytes, grown);
        if (!q->bytes) _exit(70);
        q->cap = grown;
    }
    memcpy(q->bytes + q->len, frame, n);
    q->len += n;
}

/* Handles one complete frame on the reader thread (`lock` held); 0 for a bad one. */
static int route(const uint8_t *frame, uint32_t length) {
    uint8_t type = frame[4];
    if (type == ROOMKIT_WIRE_REPLY) {
        reader r = {frame + 5, frame + 4 + length, 0};
        uint64_t request = take_u64(&r);
        int32_t result = take_i32(&r);
        char *text = take_str(&r);
        if (r.bad || r.at != r.end) { free(text); return 0; }
        for (reply *w = waiting; w; w = w->next) {
            if (w->request == request) { w->result = result; w->text = text; w->done = 1; text = NULL; break; }
        }
        free(text);
        pthread_cond_broadcast(&reply_ready);
        return 1;
    }
    if (type == ROOMKIT_WIRE_URL || type == ROOMKIT_WIRE_PING) {
        enqueue(&urgent, frame, 4 + (size_t)length);
        __atomic_add_fetch(&channel_urgent_count, 1, __ATOMIC_RELEASE);
    } else {
        enqueue(&inbox, frame, 4 + (size_t)length);
    }
    return 1;
}

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
        while (inbox.len > INBOX_HIGH_WATER && !waiting) pthread_cond_wait(&drained, &lock);
        pthread_mutex_unlock(&lock);
        ssize_t n = read(ROOMKIT_WIRE_SOCKET_FD, buf + len, cap - len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) _exit(0);  /* the bot closed the socket or died */
        len += (size_t)n;
        size_t at = 0;
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
            if (!route(buf + at, length)) _exit(71);
            at += 4 + (size_t)length;
        }
        if (inbox.len || urgent.len) pthread_cond_signal(&work_ready);
        pthread_mutex_unlock(&lock);
        memmove(buf, buf + at, len - at);
        len -= at;
    }
    return NULL;
}

int channel_start(void) {
    pthread_t thread;
    return pthread_create(&thread, NULL, read_socket, NULL);
}

/* Swaps `q` out for the caller's spare buffer (`lock` held). */
static void swap(queue *q, uint8_t **frames, size_t *len, size_t *cap) {
    uint8_t *spare = *frames;
    size_t spare_cap = *cap;
    *frames = q->bytes;
    *len = q->len;
    *cap = q->cap;
    q->bytes = spare;
    q->cap = spare_cap;
    q->len = 0;
}

void channel_take(uint8_t **frames, size_t *len, size_t *cap, uint64_t (*tick)(void)) {
    pthread_mutex_lock(&lock);
    for (;;) {
        uint64_t next = tick();
        if (inbox.len > 0 || urgent.len > 0) break;
        if (next) {
            struct timespec until;
            clock_gettime(CLOCK_MONOTONIC, &until);
            uint64_t now = now_ns(), wait = next > now ? next - now : 0;
            until.tv_sec += (time_t)(wait / 1000000000u);
            until.tv_nsec += (long)(wait % 1000000000u);
            if (until.tv_nsec >= 1000000000L) { until.tv_sec += 1; until.tv_nsec -= 1000000000L; }
            pthread_cond_timedwait(&work_ready, &lock, &until);
        } else {
            pthread_cond_wait(&work_ready, &lock);
        }
    }
    /* Urgent frames first: they jump the queue of events. */
    if (urgent.len > 0) {
        swap(&urgent, frames, len, cap);
        __atomic_store_n(&channel_urgent_count, 0, __ATOMIC_RELEASE);
    } else {
        swap(&inbox, frames, len, cap);
        pthread_cond_signal(&drained);
    }
    pthread_mutex_unlock(&lock);
}

void channel_take_urgent(uint8_t **frames, size_t *len, size_t *cap) {
    pthread_mutex_lock(&lock);
    swap(&urgent, frames, len, cap);
    __atomic_store_n(&channel_urgent_count, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&lock);
}

int32_t channel_call(int32_t function, int32_t number, int count, const char **args, char **text) {
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
    put_i32(&b, number);
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
