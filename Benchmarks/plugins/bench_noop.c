/*
 * bench_noop.c: the benchmarks' C plugins, built twice by Benchmarks/run.sh:
 *   libbench-noop-c.so   every hook returns at once (the ABI's floor);
 *   libbench-probe-c.so  (-DBENCH_PROBE) also counts magix events and records
 *                        their latency: now (CLOCK_MONOTONIC) minus the "t"
 *                        the sender put in the magix payload, in ns.
 * The probe's counters are process-wide (every load shares them); the bench
 * reads them through dlsym. Not a shipped plugin.
 */
#include "roomkit_plugin.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const roomkit_host_api *host_api;
static int on_load(void *self, const roomkit_host_api *host, const char *config) { host_api = host; return 0; }
/* The URL unchanged (isolation-bench times the round trip). */
static char *url_interrupter(void *self, const char *url) { return host_api->alloc_string(host_api->context, url); }
static void on_unload(void *self) {}

#ifdef BENCH_PROBE
#define PROBE_CAPACITY (1u << 23)
static int64_t latencies[PROBE_CAPACITY];
static _Atomic uint64_t recorded;
static _Atomic uint64_t events;
static _Atomic int64_t first_ns;
static _Atomic int64_t last_ns;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void on_room_event(void *self, int32_t kind, const char *room, const char *payload) {
    if (kind != ROOMKIT_ROOM_MAGIX) return;
    int64_t now = now_ns();
    int64_t expected = 0;
    atomic_compare_exchange_strong(&first_ns, &expected, now);
    atomic_store(&last_ns, now);
    atomic_fetch_add(&events, 1);
    const char *t = strstr(payload, "\"t\":");
    if (t == NULL) return;
    int64_t sent = strtoll(t + 4, NULL, 10);
    if (sent <= 0) return;
    uint64_t slot = atomic_fetch_add(&recorded, 1);
    if (slot < PROBE_CAPACITY) latencies[slot] = now - sent;
}

void bench_probe_reset(void) {
    atomic_store(&recorded, 0);
    atomic_store(&events, 0);
    atomic_store(&first_ns, 0);
    atomic_store(&last_ns, 0);
}

/* Events seen, and the monotonic times of the first and the last. */
void bench_probe_counters(uint64_t *count, int64_t *first, int64_t *last) {
    *count = atomic_load(&events);
    *first = atomic_load(&first_ns);
    *last = atomic_load(&last_ns);
}

/* Copies up to max recorded latencies (ns); returns how many. */
size_t bench_probe_latencies(int64_t *out, size_t max) {
    uint64_t n = atomic_load(&recorded);
    if (n > PROBE_CAPACITY) n = PROBE_CAPACITY;
    if (n > max) n = max;
    memcpy(out, latencies, n * sizeof(int64_t));
    return (size_t)n;
}
#else
static void on_room_event(void *self, int32_t kind, const char *room, const char *payload) {}
#endif

static void on_player_event(void *self, int32_t kind, const char *room, const char *payload) {}

static roomkit_plugin descriptor = {
    .struct_size = sizeof(roomkit_plugin),
    .abi_major = ROOMKIT_PLUGIN_ABI_MAJOR,
    .abi_minor = ROOMKIT_PLUGIN_ABI_MINOR,
    .on_load = on_load,
    .on_unload = on_unload,
    .on_room_event = on_room_event,
    .on_player_event = on_player_event,
    .url_interrupter = url_interrupter,
};

const roomkit_plugin *roomkit_plugin_entry(uint16_t major, uint16_t minor) {
    return major == ROOMKIT_PLUGIN_ABI_MAJOR ? &descriptor : NULL;
}
