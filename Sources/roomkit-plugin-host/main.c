/*
 * roomkit-plugin-host: runs ONE C-ABI plugin library in its own process for
 * roombot ("isolation": "process"). It is one implementation of the child
 * side of the plugin wire (docs/PLUGIN-WIRE.md): it dlopens the library and
 * calls its hooks exactly as the inline host does, through the unchanged
 * roomkit_plugin.h; every host function that acts on rooms goes to the bot
 * as a CALL frame. Timers and alloc/free are served here: they act on
 * nothing but the plugin.
 *
 * Usage (roombot starts it; not meant for people):
 *   roomkit-plugin-host LIBRARY ENTRY BOT-PID
 * with the socket on fd 3, ROOMKIT_WIRE_VERSIONS in the environment, and,
 * when ROOMKIT_PROGRESS_FD is set, the progress page on that fd.
 *
 * Threads: the main thread runs every hook and timer, one at a time (the
 * plugin's serial queue, hooks.c); a reader thread owns the socket's read
 * side (channel.c).
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
#include <time.h>
#include <unistd.h>

static roomkit_host_api table;

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
    {
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

static void hello(uint32_t version, uint32_t flags, const roomkit_plugin *plugin, int32_t stage, const char *message) {
    uint32_t hooks = 0;
    if (plugin && stage == ROOMKIT_WIRE_STAGE_OK) {
        if (plugin->url_interrupter) hooks |= ROOMKIT_WIRE_HOOK_URL;
        if (plugin->throw_error) hooks |= ROOMKIT_WIRE_HOOK_THROW_ERROR;
        if (plugin->on_room_event) hooks |= ROOMKIT_WIRE_HOOK_ROOM;
        if (plugin->on_player_event) hooks |= ROOMKIT_WIRE_HOOK_PLAYER;
        if (ROOMKIT_HAS_MEMBER(plugin, on_config_changed)) hooks |= ROOMKIT_WIRE_HOOK_CONFIG_CHANGED;
        if (ROOMKIT_HAS_MEMBER(plugin, export_state)) hooks |= ROOMKIT_WIRE_HOOK_EXPORT_STATE;
        if (ROOMKIT_HAS_MEMBER(plugin, import_state)) hooks |= ROOMKIT_WIRE_HOOK_IMPORT_STATE;
    }
    buffer b = {0};
    begin(&b, ROOMKIT_WIRE_HELLO);
    put_u32(&b, version);
    put_u32(&b, flags);
    put_u32(&b, hooks);
    put_u16(&b, plugin ? plugin->abi_major : ROOMKIT_PLUGIN_ABI_MAJOR);
    put_u16(&b, plugin ? plugin->abi_minor : ROOMKIT_PLUGIN_ABI_MINOR);
    put_i32(&b, stage);
    put_str(&b, message ? message : "");
    send_frame(&b);
}

/* Whether the bot's ROOMKIT_WIRE_VERSIONS (a comma-separated list) offers ours. */
static int offered(const char *versions) {
    if (!versions) return 0;
    for (const char *p = versions; *p;) {
        char *end;
        unsigned long v = strtoul(p, &end, 10);
        if (end != p && v == ROOMKIT_WIRE_VERSION && (*end == ',' || *end == 0)) return 1;
        p = *end ? end + 1 : end;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "roomkit-plugin-host is started by roombot, not by hand\n");
        return 64;
    }
    const char *library = argv[1], *entry_name = argv[2];
    pid_t bot = (pid_t)strtol(argv[3], NULL, 10);

    /* Never outlive the bot: a signal when it dies, and a check for the race. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != bot) return 0;
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);

    char message[1024];
    const char *versions = getenv("ROOMKIT_WIRE_VERSIONS");
    if (!offered(versions)) {
        snprintf(message, sizeof message, "wire versions offered %s, roomkit-plugin-host speaks %u",
                 versions ? versions : "(none: ROOMKIT_WIRE_VERSIONS is not set)", ROOMKIT_WIRE_VERSION);
        hello(0, 0, NULL, ROOMKIT_WIRE_STAGE_VERSION, message);
        return 0;
    }
    uint32_t flags = 0;
    const char *page_fd = getenv("ROOMKIT_PROGRESS_FD");
    if (page_fd && *page_fd) {
        void *page = mmap(NULL, sizeof(roomkit_wire_progress), PROT_READ | PROT_WRITE, MAP_SHARED, atoi(page_fd), 0);
        if (page == MAP_FAILED) { hello(ROOMKIT_WIRE_VERSION, 0, NULL, ROOMKIT_WIRE_STAGE_SETUP, "cannot map the progress page"); return 70; }
        progress = page;
        flags |= ROOMKIT_WIRE_FLAG_PROGRESS_PAGE;
    }
    install_crash_notes();

    if (channel_start() != 0) { hello(ROOMKIT_WIRE_VERSION, flags, NULL, ROOMKIT_WIRE_STAGE_SETUP, "cannot start the reader thread"); return 70; }

    dlerror();
    void *mapping = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!mapping) {
        const char *reason = dlerror();
        snprintf(message, sizeof message, "dlopen failed: %s", reason ? reason : "unknown dlopen error");
        hello(ROOMKIT_WIRE_VERSION, flags, NULL, ROOMKIT_WIRE_STAGE_DLOPEN, message);
        return 0;
    }
    void *symbol = dlsym(mapping, entry_name);
    if (!symbol) {
        snprintf(message, sizeof message, "entry symbol '%s' not found in %s", entry_name, library);
        hello(ROOMKIT_WIRE_VERSION, flags, NULL, ROOMKIT_WIRE_STAGE_MISSING_ENTRY, message);
        return 0;
    }
    roomkit_plugin_entry_fn entry = (roomkit_plugin_entry_fn)symbol;
    const roomkit_plugin *plugin = entry(ROOMKIT_PLUGIN_ABI_MAJOR, ROOMKIT_PLUGIN_ABI_MINOR);
    if (!plugin) {
        snprintf(message, sizeof message, "the entry refused host ABI %d.%d", ROOMKIT_PLUGIN_ABI_MAJOR, ROOMKIT_PLUGIN_ABI_MINOR);
        hello(ROOMKIT_WIRE_VERSION, flags, NULL, ROOMKIT_WIRE_STAGE_ENTRY_REFUSED, message);
        return 0;
    }
    size_t minimum = offsetof(roomkit_plugin, on_player_event) + sizeof(void *);
    if (plugin->abi_major != ROOMKIT_PLUGIN_ABI_MAJOR || plugin->abi_minor > ROOMKIT_PLUGIN_ABI_MINOR || plugin->struct_size < minimum) {
        snprintf(message, sizeof message, "ABI mismatch: plugin %u.%u (descriptor %u bytes), host %d.%d",
                 plugin->abi_major, plugin->abi_minor, plugin->struct_size, ROOMKIT_PLUGIN_ABI_MAJOR, ROOMKIT_PLUGIN_ABI_MINOR);
        hello(ROOMKIT_WIRE_VERSION, flags, NULL, ROOMKIT_WIRE_STAGE_ABI_MISMATCH, message);
        return 0;
    }

    /* The bot applies the memory and CPU limits once HELLO arrives (the
       loader itself needed address space), before any hook runs. */
    table = host_api_table();
    hooks_init(plugin, &table);
    hello(ROOMKIT_WIRE_VERSION, flags, plugin, ROOMKIT_WIRE_STAGE_OK, "");

    uint8_t *work = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        channel_take(&work, &len, &cap, run_timers);
        for (size_t at = 0; at < len;) {
            uint32_t length;
            memcpy(&length, work + at, 4);
            if (!hooks_handle(work + at, length)) _exit(0);
            at += 4 + (size_t)length;
        }
        hooks_flush_done();
    }
}
