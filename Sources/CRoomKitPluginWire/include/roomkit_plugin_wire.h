/*
 * roomkit_plugin_wire.h: the private protocol between roombot and
 * roomkit-plugin-host, the process that runs one "isolation": "process"
 * plugin. Not part of the plugin ABI (plugins never see it); both sides are
 * built from the same tree, so it has no version negotiation.
 *
 * Transport: one AF_UNIX SOCK_STREAM socketpair (fd 3 in the child). Every
 * message is a frame: a 4-byte little-endian length (of what follows), a
 * 1-byte type, then the body. Strings in a body are a 4-byte length and the
 * bytes (no NUL); the length ROOMKIT_WIRE_NULL means a NULL string. The
 * plugin's stdout and stderr are separate pipes, so nothing a plugin prints
 * can reach the socket.
 *
 * Progress: a shared page (a memfd, fd 4 in the child) that the child
 * updates around every hook call: which call is running, since when, and the
 * last event finished. The bot reads it to time hangs and, after a crash, to
 * name the event being handled and to resend the events not yet finished.
 */
#ifndef ROOMKIT_PLUGIN_WIRE_H
#define ROOMKIT_PLUGIN_WIRE_H

#include <stdint.h>

#define ROOMKIT_WIRE_NULL 0xFFFFFFFFu
/* Frames larger than this do not parse (a crash of the sender). */
#define ROOMKIT_WIRE_MAX_FRAME 67108864u /* 64 MiB */
#define ROOMKIT_WIRE_SOCKET_FD 3
#define ROOMKIT_WIRE_PROGRESS_FD 4

/* Bot -> plugin process. */
enum roomkit_wire_down {
    ROOMKIT_WIRE_LOAD = 1,         /* str config */
    ROOMKIT_WIRE_ROOM_EVENT = 2,   /* u64 seq, i32 kind, str room, str payload */
    ROOMKIT_WIRE_PLAYER_EVENT = 3, /* u64 seq, i32 kind, str room, str payload */
    ROOMKIT_WIRE_THROW_ERROR = 4,  /* u64 seq, i64 code, str domain, str message */
    ROOMKIT_WIRE_URL = 5,          /* u64 request, str url */
    ROOMKIT_WIRE_REPLY = 6,        /* u64 request, i32 result, str text-or-NULL */
    ROOMKIT_WIRE_UNLOAD = 7,       /* (empty) */
    /* ABI 1.1 hooks. Export and import are answered with URL_REPLY (same
     * request numbering), never with NULL: export with "S" + the state or
     * "N" for none, import with its result as decimal text. */
    ROOMKIT_WIRE_CONFIG_CHANGED = 8, /* u64 seq, i32 has_room, str room, str config */
    ROOMKIT_WIRE_EXPORT_STATE = 9,   /* u64 request */
    ROOMKIT_WIRE_IMPORT_STATE = 10,  /* u64 request, str state */
};
/* import_state's reply when the plugin has no import_state hook. */
#define ROOMKIT_WIRE_NO_IMPORT (-100)

/* Plugin process -> bot. */
enum roomkit_wire_up {
    ROOMKIT_WIRE_HELLO = 64,       /* i32 stage (0 = mapped and checked), str message */
    ROOMKIT_WIRE_LOADED = 65,      /* i32 on_load's result */
    ROOMKIT_WIRE_URL_REPLY = 66,   /* u64 request, str url-or-NULL */
    ROOMKIT_WIRE_LOG = 67,         /* i32 level, str message */
    ROOMKIT_WIRE_CALL = 68,        /* u64 request, i32 function, i32 int argument, u32 n, n x str */
    ROOMKIT_WIRE_UNLOADED = 69,    /* (empty) */
};

/* Host functions proxied with ROOMKIT_WIRE_CALL; the bot answers each with a REPLY. */
enum roomkit_wire_function {
    ROOMKIT_WIRE_DISPATCH_MAGIX = 1,    /* room, event, payload, to-or-NULL */
    ROOMKIT_WIRE_SET_GLOBAL_STATE = 2,  /* room, patch */
    ROOMKIT_WIRE_INSERT_IMAGE = 3,      /* room, image */
    ROOMKIT_WIRE_PUT_SCENES = 4,        /* room, dir, scenes; int argument = index or -1 */
    ROOMKIT_WIRE_ROOM_STATE = 5,        /* room; the reply's text is the JSON or NULL */
    /* ABI 1.1 host functions (same arguments as in roomkit_plugin.h, in order). */
    ROOMKIT_WIRE_SET_MEMBER_STATE = 6,  /* room, patch */
    ROOMKIT_WIRE_SET_EXTRA_INFO = 7,    /* room, key, value */
    ROOMKIT_WIRE_PUBLISH_STREAM = 8,    /* room, stream, extra-or-NULL */
    ROOMKIT_WIRE_UNPUBLISH_STREAM = 9,  /* room, stream */
    ROOMKIT_WIRE_LOGIN_ROOM = 10,       /* room */
    ROOMKIT_WIRE_LOGOUT_ROOM = 11,      /* room */
    ROOMKIT_WIRE_SWITCH_ROOM = 12,      /* from, to */
    ROOMKIT_WIRE_ROOM_MEMBERS = 13,     /* room; text: JSON or NULL */
    ROOMKIT_WIRE_CONFIG_GET = 14,       /* room-or-NULL; text: JSON */
    ROOMKIT_WIRE_KV_GET = 15,           /* key; text: value or NULL */
    ROOMKIT_WIRE_KV_SET = 16,           /* key, value; result 0, -1 or ROOMKIT_KV_FULL */
    ROOMKIT_WIRE_KV_DELETE = 17,        /* key; result 1, 0 or -1 */
    ROOMKIT_WIRE_KV_SCAN = 18,          /* prefix; text: JSON object or NULL */
};

/* HELLO stages: why the child could not map the plugin (PluginLoadError.Stage). */
enum roomkit_wire_stage {
    ROOMKIT_WIRE_STAGE_OK = 0,
    ROOMKIT_WIRE_STAGE_DLOPEN = 1,
    ROOMKIT_WIRE_STAGE_MISSING_ENTRY = 2,
    ROOMKIT_WIRE_STAGE_ENTRY_REFUSED = 3,
    ROOMKIT_WIRE_STAGE_ABI_MISMATCH = 4,
    ROOMKIT_WIRE_STAGE_HOOK_NOT_EXPORTED = 5,
    ROOMKIT_WIRE_STAGE_SETUP = 6,
};

/* What the child is doing (roomkit_wire_progress.busy_what). */
enum roomkit_wire_busy {
    ROOMKIT_WIRE_IDLE = 0,
    ROOMKIT_WIRE_BUSY_EVENT = 1,
    ROOMKIT_WIRE_BUSY_URL = 2,
    ROOMKIT_WIRE_BUSY_LOAD = 3,
    ROOMKIT_WIRE_BUSY_UNLOAD = 4,
    ROOMKIT_WIRE_BUSY_TIMER = 5,
};

/* Hook bits of the child's third argument (the hooks the manifest declares). */
#define ROOMKIT_WIRE_HOOK_URL 1
#define ROOMKIT_WIRE_HOOK_THROW_ERROR 2
#define ROOMKIT_WIRE_HOOK_ROOM 4
#define ROOMKIT_WIRE_HOOK_PLAYER 8

/* The shared progress page. Written by the child only, read by the bot. */
typedef struct roomkit_wire_progress {
    uint64_t busy_seq;        /* the event being handled (0: none) */
    uint64_t busy_since_ns;   /* CLOCK_MONOTONIC when the current call began (0: idle) */
    uint64_t done_seq;        /* the last event whose hook returned */
    int32_t busy_what;        /* roomkit_wire_busy */
    int32_t crash_errno;      /* errno when a fatal signal arrived (ENOMEM: out of memory) */
    uint64_t crash_vm_kb;     /* VmPeak when a fatal signal arrived */
} roomkit_wire_progress;

static inline uint64_t roomkit_wire_load64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline int32_t roomkit_wire_load32(const int32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline void roomkit_wire_store64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
static inline void roomkit_wire_store32(int32_t *p, int32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

/* Bot side helpers (wire.c). */
#include <sys/types.h>
/* A zeroed shared progress page: returns its fd (close-on-exec) or -errno. */
int roomkit_wire_progress_create(roomkit_wire_progress **out);
void roomkit_wire_progress_release(roomkit_wire_progress *page);
/* posix_spawn with the socket and progress page on fds 3 and 4, stdout and
 * stderr on out_fd and err_fd, stdin /dev/null; returns the pid or -errno. */
pid_t roomkit_wire_spawn(const char *path, char *const argv[], int socket_fd, int progress_fd, int out_fd, int err_fd);
/* pipe2(O_CLOEXEC): 0 or -errno. */
int roomkit_wire_pipe(int fds[2]);
/* waitpid: 1 when reaped (signal_number or exit_code set), 0 still running, -1 error. */
int roomkit_wire_reap(pid_t pid, int block, int *signal_number, int *exit_code);

#endif /* ROOMKIT_PLUGIN_WIRE_H */
