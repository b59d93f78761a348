/*
 * roomkit_plugin_wire.h: the plugin wire, version 1, as C constants.
 * docs/PLUGIN-WIRE.md is the contract (any language can implement a plugin
 * child from it); this header names its numbers for the two C sides:
 * roombot's (through Swift) and roomkit-plugin-host's.
 *
 * Transport: one AF_UNIX SOCK_STREAM socketpair (fd 3 in the child). Every
 * message is a frame: a 4-byte little-endian length (of what follows), a
 * 1-byte type, then the body. Strings in a body are a 4-byte length and the
 * bytes (no NUL); the length ROOMKIT_WIRE_NULL means a NULL string. The
 * child's stdout and stderr are separate pipes, so nothing a plugin prints
 * can reach the socket.
 *
 * Progress (optional, PLUGIN-WIRE.md section 8.3): a shared page (a memfd, fd 4 in the
 * child) that a child may update around every call: which call is running,
 * since when, and the last event finished. roomkit-plugin-host uses it; a
 * child without it is timed by its DONE and PONG frames.
 */
#ifndef ROOMKIT_PLUGIN_WIRE_H
#define ROOMKIT_PLUGIN_WIRE_H

#include <stdint.h>

#define ROOMKIT_WIRE_VERSION 1u
/* What the bot offers in ROOMKIT_WIRE_VERSIONS. */
#define ROOMKIT_WIRE_VERSIONS_OFFERED "1"
#define ROOMKIT_WIRE_NULL 0xFFFFFFFFu
/* Frames larger than this do not parse (a bad frame). */
#define ROOMKIT_WIRE_MAX_FRAME 67108864u /* 64 MiB */
#define ROOMKIT_WIRE_SOCKET_FD 3
#define ROOMKIT_WIRE_PROGRESS_FD 4
/* An EVENTS frame holds at most this many records, or about this many bytes. */
#define ROOMKIT_WIRE_BATCH_RECORDS 1024u
#define ROOMKIT_WIRE_BATCH_BYTES (1u << 20)

/* Bot -> child. Types 3, 4 and 8 belonged to the private wire before version 1. */
enum roomkit_wire_down {
    ROOMKIT_WIRE_LOAD = 1,         /* u32 timeout_ms, str config */
    ROOMKIT_WIRE_EVENTS = 2,       /* u32 count, count x record (below) */
    ROOMKIT_WIRE_URL = 5,          /* u64 request, u32 deadline_us, str url */
    ROOMKIT_WIRE_REPLY = 6,        /* u64 request, i32 result, str text-or-NULL */
    ROOMKIT_WIRE_UNLOAD = 7,       /* (empty) */
    ROOMKIT_WIRE_EXPORT_STATE = 9, /* u64 request; ANSWER text = state or NULL */
    ROOMKIT_WIRE_IMPORT_STATE = 10,/* u64 request, str state; ANSWER result */
    ROOMKIT_WIRE_PING = 11,        /* u64 nonce */
};
/* EVENTS records: u8 type, u64 seq, i64 number, str a, str b. */
enum roomkit_wire_record {
    ROOMKIT_WIRE_RECORD_ROOM = 1,           /* number = kind, a = room, b = payload */
    ROOMKIT_WIRE_RECORD_PLAYER = 2,         /* number = kind, a = room, b = payload */
    ROOMKIT_WIRE_RECORD_THROW_ERROR = 3,    /* number = code, a = domain, b = message */
    ROOMKIT_WIRE_RECORD_CONFIG_CHANGED = 4, /* number = 0, a = room or NULL, b = config */
};
/* import_state's answer when the child has no import_state hook. */
#define ROOMKIT_WIRE_NO_IMPORT (-100)

/* Child -> bot. */
enum roomkit_wire_up {
    ROOMKIT_WIRE_HELLO = 64,       /* u32 version, u32 flags, u32 hooks, u16 abi_major, u16 abi_minor, i32 stage, str message */
    ROOMKIT_WIRE_LOADED = 65,      /* i32 on_load's result */
    ROOMKIT_WIRE_ANSWER = 66,      /* u64 request, i32 result, str text-or-NULL (URL, EXPORT_STATE, IMPORT_STATE) */
    ROOMKIT_WIRE_LOG = 67,         /* i32 level, str message */
    ROOMKIT_WIRE_CALL = 68,        /* u64 request (0: no reply), i32 function, i32 number, u32 n, n x str */
    ROOMKIT_WIRE_UNLOADED = 69,    /* (empty) */
    ROOMKIT_WIRE_DONE = 70,        /* u64 seq: every record up to it is finished */
    ROOMKIT_WIRE_PONG = 71,        /* u64 nonce */
    ROOMKIT_WIRE_FAILED = 72,      /* u64 seq, str reason: that record's handler failed (one failed call) */
};
/* HELLO flags. */
#define ROOMKIT_WIRE_FLAG_PROGRESS_PAGE 1u

/* Host functions called with ROOMKIT_WIRE_CALL; the bot answers each with a REPLY unless request is 0. */
enum roomkit_wire_function {
    ROOMKIT_WIRE_DISPATCH_MAGIX = 1,    /* room, event, payload, to-or-NULL */
    ROOMKIT_WIRE_SET_GLOBAL_STATE = 2,  /* room, patch */
    ROOMKIT_WIRE_INSERT_IMAGE = 3,      /* room, image */
    ROOMKIT_WIRE_PUT_SCENES = 4,        /* room, dir, scenes; number = index or -1 */
    ROOMKIT_WIRE_ROOM_STATE = 5,        /* room; the reply's text is the JSON or NULL */
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
    ROOMKIT_WIRE_STAGE_VERSION = 7,  /* no wire version in common */
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

/* HELLO hook bits: the hooks the child implements. */
#define ROOMKIT_WIRE_HOOK_URL 1u
#define ROOMKIT_WIRE_HOOK_THROW_ERROR 2u
#define ROOMKIT_WIRE_HOOK_ROOM 4u
#define ROOMKIT_WIRE_HOOK_PLAYER 8u
#define ROOMKIT_WIRE_HOOK_CONFIG_CHANGED 16u
#define ROOMKIT_WIRE_HOOK_EXPORT_STATE 32u
#define ROOMKIT_WIRE_HOOK_IMPORT_STATE 64u

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
/* posix_spawn with the socket on fd 3, the progress page on fd 4 (none when
 * progress_fd < 0), stdout and stderr on out_fd and err_fd, stdin /dev/null,
 * the environment envp, and the working directory cwd (NULL: the bot's);
 * returns the pid or -errno. */
pid_t roomkit_wire_spawn(const char *path, char *const argv[], char *const envp[], const char *cwd,
                         int socket_fd, int progress_fd, int out_fd, int err_fd);
/* Applies the memory (MiB, RLIMIT_AS) and CPU (seconds, RLIMIT_CPU) limits to
 * a running child (0: no limit). The address-space limit is skipped in a
 * sanitizer build (shadow memory). Returns 0 or -errno. */
int roomkit_wire_limit(pid_t pid, unsigned long memory_mb, unsigned long cpu_seconds);
/* pipe2(O_CLOEXEC): 0 or -errno. */
int roomkit_wire_pipe(int fds[2]);
/* waitpid: 1 when reaped (signal_number or exit_code set), 0 still running, -1 error. */
int roomkit_wire_reap(pid_t pid, int block, int *signal_number, int *exit_code);

#endif /* ROOMKIT_PLUGIN_WIRE_H */
