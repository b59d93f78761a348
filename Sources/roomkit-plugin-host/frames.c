/* roomkit-plugin-host: frames out and in (docs/PLUGIN-WIRE.md section 2). */
#define _GNU_SOURCE
#include "host.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;

uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The same clock read at the kernel's tick (a few ms behind at most): no
   hardware clock read, so it costs a load per call. For the per-record stamps
   (busy_since_ns, the DONE interval), where CLOCK_MONOTONIC itself was most
   of this child's time per record on a virtual machine. */
uint64_t coarse_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* MARK: frames out */


void put(buffer *b, const void *data, size_t n) {
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
void put_u16(buffer *b, uint16_t v) { put(b, &v, 2); }
void put_u32(buffer *b, uint32_t v) { put(b, &v, 4); }
void put_i32(buffer *b, int32_t v) { put(b, &v, 4); }
void put_u64(buffer *b, uint64_t v) { put(b, &v, 8); }
void put_str(buffer *b, const char *s) {
    if (!s) { put_u32(b, ROOMKIT_WIRE_NULL); return; }
    uint32_t n = (uint32_t)strlen(s);
    put_u32(b, n);
    put(b, s, n);
}
void begin(buffer *b, uint8_t type) {
    b->len = 0;
    put_u32(b, 0);
    put(b, &type, 1);
}

/* Sends a finished frame; a failed write means the bot is gone. */
void send_frame(buffer *b) {
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


static void take(reader *r, void *out, size_t n) {
    if (r->bad || (size_t)(r->end - r->at) < n) { r->bad = 1; memset(out, 0, n); return; }
    memcpy(out, r->at, n);
    r->at += n;
}
uint8_t take_u8(reader *r) { uint8_t v; take(r, &v, 1); return v; }
uint32_t take_u32(reader *r) { uint32_t v; take(r, &v, 4); return v; }
int32_t take_i32(reader *r) { int32_t v; take(r, &v, 4); return v; }
uint64_t take_u64(reader *r) { uint64_t v; take(r, &v, 8); return v; }

/* A NUL-terminated copy of `n` bytes at `at` into `scratch` (kept and grown). */
const char *copy_str_into(const uint8_t *at, uint32_t n, buffer *scratch) {
    if ((size_t)n + 1 > scratch->cap) {
        size_t cap = scratch->cap ? scratch->cap : 256;
        while (cap < (size_t)n + 1) cap *= 2;
        free(scratch->bytes);
        scratch->bytes = malloc(cap);
        if (!scratch->bytes) _exit(70);
        scratch->cap = cap;
    }
    memcpy(scratch->bytes, at, n);
    scratch->bytes[n] = 0;
    scratch->len = (size_t)n + 1;
    return (const char *)scratch->bytes;
}

char *take_str(reader *r) {
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
