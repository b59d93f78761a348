/*
 * roomkit_plugin.h: the RoomKit plugin ABI, version 1.1.
 *
 * A plugin is a shared library that exports one symbol,
 *
 *     const roomkit_plugin *roomkit_plugin_entry(uint16_t host_abi_major,
 *                                                uint16_t host_abi_minor);
 *
 * (the manifest's "entry" may name another). The host calls it once after
 * dlopen(RTLD_NOW | RTLD_LOCAL); the plugin returns a descriptor that lives
 * as long as the library is mapped (a static struct is typical), or NULL to
 * refuse the host's ABI.
 *
 * Versioning. The host accepts a descriptor whose abi_major equals its own
 * and whose abi_minor is not newer than its own. Both structs begin with
 * their size, so each side reads only the members the other one has.
 *
 * EVOLUTION RULE: members are only ever added at the END of a struct, with a
 * minor version bump; nothing is removed, reordered or retyped within a
 * major version. Enum values are never renumbered.
 *
 * Strings. Every string crossing the ABI is NUL-terminated UTF-8.
 *   - Strings the host passes to a hook (urls, room IDs, JSON payloads) are
 *     owned by the host and valid only until the hook returns: copy them to
 *     keep them.
 *   - Strings the plugin passes to a host function are owned by the plugin;
 *     the host copies what it keeps before returning.
 *   - A string a hook RETURNS (url_interrupter, export_state) must be
 *     allocated with host->alloc_string; the host frees it with its own
 *     free_string (never a bare free()). NULL means failure.
 *   - A string a host function RETURNS (room_state_json) is allocated by the
 *     host; the plugin frees it with host->free_string.
 *
 * Threading. Every hook of one plugin runs on that plugin's own serial
 * queue, never on the event loop and never concurrently with another hook
 * of the same plugin. Host functions may be called from any thread. A hook
 * that runs longer than the manifest's timeoutMs counts as a failure;
 * repeated failures quarantine the plugin (its hooks are no longer called).
 * The host never unloads the library while a hook could still run; it does
 * not dlclose at all.
 */
#ifndef ROOMKIT_PLUGIN_H
#define ROOMKIT_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ROOMKIT_PLUGIN_ABI_MAJOR 1
#define ROOMKIT_PLUGIN_ABI_MINOR 1
#define ROOMKIT_PLUGIN_ENTRY_SYMBOL "roomkit_plugin_entry"

/** Log levels for host->log. */
enum roomkit_log_level {
    ROOMKIT_LOG_DEBUG = 0,
    ROOMKIT_LOG_INFO = 1,
    ROOMKIT_LOG_WARNING = 2,
    ROOMKIT_LOG_ERROR = 3,
};

/** Room event kinds for on_room_event. The payload is a JSON object with the
 *  fields of the matching event-log line (CLI.md), without ts and event. */
enum roomkit_room_event_kind {
    ROOMKIT_ROOM_STATE_CHANGED = 1,       /* room, reason, errorCode */
    ROOMKIT_ROOM_PHASE_CHANGED = 2,       /* room, phase */
    ROOMKIT_ROOM_STATE_MODIFIED = 3,      /* room, from, keys */
    ROOMKIT_ROOM_WRITABLE_CHANGED = 4,    /* room, writable */
    ROOMKIT_ROOM_DISCONNECTED = 5,        /* room, error */
    ROOMKIT_ROOM_KICKED = 6,              /* room, code, reason */
    ROOMKIT_ROOM_APPEND_FRAME_ERROR = 7,  /* room, memberId, error */
    ROOMKIT_ROOM_MAGIX = 8,               /* room, from, event, payload */
    ROOMKIT_ROOM_USER_UPDATE = 9,         /* room, type, users */
    ROOMKIT_ROOM_STREAM_UPDATE = 10,      /* room, type, streams */
    ROOMKIT_ROOM_EXTRA_INFO_UPDATE = 11,  /* room, key, value */
    ROOMKIT_ROOM_TOKEN_WILL_EXPIRE = 12,  /* room, remaining */
    /* ABI 1.1 and later. Sent only to plugins whose descriptor says
     * abi_minor >= 1; a 1.0 plugin never sees a kind it does not know. */
    ROOMKIT_ROOM_RESYNC = 13,             /* room, reason, lastAppliedSeq, resumedAtSeq:
                                             continuity broke; rebuild derived state */
};

/** Player event kinds for on_player_event (payload: the event-log fields). */
enum roomkit_player_event_kind {
    ROOMKIT_PLAYER_PHASE = 1,             /* phase */
    ROOMKIT_PLAYER_FIRST_FRAME = 2,       /* (none) */
    ROOMKIT_PLAYER_TIME_CHANGED = 3,      /* time */
    ROOMKIT_PLAYER_STATE_CHANGED = 4,     /* keys */
    ROOMKIT_PLAYER_STOPPED_WITH_ERROR = 5,/* error */
    ROOMKIT_PLAYER_APPEND_FRAME_ERROR = 6,/* error */
    ROOMKIT_PLAYER_MAGIX = 7,             /* from, event, payload */
};

/** Called on the plugin's queue when a timer fires. */
typedef void (*roomkit_timer_fn)(void *user, uint64_t timer_id);

/** The host's function table, handed to on_load. Valid until on_unload returns. */
typedef struct roomkit_host_api {
    uint32_t struct_size;      /* sizeof(roomkit_host_api) of the host */
    uint16_t abi_major;
    uint16_t abi_minor;
    void *context;             /* pass back as the first argument of every call */

    void (*log)(void *context, int level, const char *message);
    /* Actions return 0 when queued, -1 for bad arguments (not JSON, unknown
     * room). They complete asynchronously; a failure arrives as one
     * throw_error call to the plugin that acted (whether or not its manifest
     * declares the throwError hook), with the action's name as domain
     * ("dispatch_magix", "set_global_state", "insert_image", "put_scenes")
     * and the request's error code (e.g. 1009003 on a read-only session). */
    int (*dispatch_magix)(void *context, const char *room, const char *event,
                          const char *payload_json, const char *to_json_or_null);
    int (*set_global_state)(void *context, const char *room, const char *patch_json);
    int (*insert_image)(void *context, const char *room, const char *image_json);
    int (*put_scenes)(void *context, const char *room, const char *dir,
                      const char *scenes_json, int32_t index_or_minus_one);
    /* The room's state as JSON ({globalState, sceneState, broadcastState,
     * members, streams, extraInfo, phase, writable}), or NULL for an unknown
     * room. Free with free_string. */
    char *(*room_state_json)(void *context, const char *room);
    /* Timers run on the plugin's queue; they are removed when the plugin
     * unloads. repeat_ms 0 means one-shot. Returns an id (never 0). */
    uint64_t (*set_timer)(void *context, uint64_t delay_ms, uint64_t repeat_ms,
                          roomkit_timer_fn fire, void *user);
    void (*cancel_timer)(void *context, uint64_t timer_id);
    /* Memory for strings crossing the ABI (see "Strings" above). */
    char *(*alloc_string)(void *context, const char *utf8);
    void (*free_string)(void *context, char *string);

    /* ---- ABI 1.1 and later ------------------------------------------------
     * A plugin that may run in a 1.0 host checks each member first:
     *     if (ROOMKIT_HAS_MEMBER(host, kv_get)) ...
     * Room actions below behave like dispatch_magix: 0 when queued, -1 for bad
     * arguments or an unknown room; a failure arrives later as throw_error
     * with the function's name as domain. */
    int (*set_member_state)(void *context, const char *room, const char *patch_json);   /* 1.1 */
    int (*set_extra_info)(void *context, const char *room, const char *key, const char *value); /* 1.1 */
    /* extra_info_or_null: the stream's extra info string. */
    int (*publish_stream)(void *context, const char *room, const char *stream_id,
                          const char *extra_info_or_null);                              /* 1.1 */
    int (*unpublish_stream)(void *context, const char *room, const char *stream_id);    /* 1.1 */
    /* Asynchronous; the outcome arrives as room events (ROOMKIT_ROOM_STATE_CHANGED
     * with reason LOGINING, then LOGINED or LOGIN_FAILED; LOGOUT), and a failure
     * also as throw_error ("login_room", "logout_room", "switch_room"). The room
     * must match the plugin's manifest "rooms"; login_room returns -1 when the
     * host has no identity to log in with. */
    int (*login_room)(void *context, const char *room);                                 /* 1.1 */
    int (*logout_room)(void *context, const char *room);                                /* 1.1 */
    int (*switch_room)(void *context, const char *from_room, const char *to_room);     /* 1.1 */
    /* The room's members as a JSON array, or NULL for an unknown room. Free with free_string. */
    char *(*room_members_json)(void *context, const char *room);                        /* 1.1 */
    /* The plugin's config as resolved for room (base "config" merged with every
     * matching "roomConfig" glob), or the base config for NULL. Free with free_string. */
    char *(*config_get_json)(void *context, const char *room_or_null);                 /* 1.1 */
    /* Per-plugin storage, persisted by the bot (survives restarts and reloads).
     * Keys and values are UTF-8 strings. kv_get returns NULL when the key is
     * absent (free the result with free_string). kv_set returns 0, -1 for bad
     * arguments or a storage error, ROOMKIT_KV_FULL when the plugin's quota
     * would be exceeded (nothing is written; the host logs the quota).
     * kv_delete returns 1 when a key was removed, 0 when absent, -1 on error.
     * kv_scan_json returns a JSON object {key: value} of every key starting
     * with prefix ("" for all), free with free_string. */
    char *(*kv_get)(void *context, const char *key);                                   /* 1.1 */
    int (*kv_set)(void *context, const char *key, const char *value);                  /* 1.1 */
    int (*kv_delete)(void *context, const char *key);                                  /* 1.1 */
    char *(*kv_scan_json)(void *context, const char *prefix);                          /* 1.1 */
} roomkit_host_api;

/** kv_set: the plugin's storage quota would be exceeded. */
#define ROOMKIT_KV_FULL (-2)
/** Any room action: the plugin's action budget (manifest actionsPerSecond,
 *  actionBurst) is spent; nothing was queued. A RoomKit extension within ABI
 *  1.1: older hosts never return it. */
#define ROOMKIT_ACTION_BUDGET (-3)

/** A plugin's descriptor. Unused hooks are NULL; a hook the manifest
 *  declares must be non-NULL (else the load fails). */
typedef struct roomkit_plugin {
    uint32_t struct_size;      /* sizeof(roomkit_plugin) of the plugin */
    uint16_t abi_major;        /* ROOMKIT_PLUGIN_ABI_MAJOR it was built with */
    uint16_t abi_minor;
    void *self;                /* passed back as the first argument of every hook */

    /* 0 on success; config_json is the manifest's "config" (or "null"). */
    int (*on_load)(void *self, const roomkit_host_api *host, const char *config_json);
    void (*on_unload)(void *self);
    void (*throw_error)(void *self, const char *domain, int64_t code, const char *message);
    /* Returns the rewritten URL (host->alloc_string), or NULL on failure. */
    char *(*url_interrupter)(void *self, const char *url);
    void (*on_room_event)(void *self, int32_t kind, const char *room, const char *payload_json);
    void (*on_player_event)(void *self, int32_t kind, const char *room, const char *payload_json);

    /* ---- ABI 1.1 and later (the host reads these only when struct_size covers them) */
    /* The config changed live (PUT /v1/plugins/{name}/config): first once with
     * room NULL and the new base config, then once per room the bot is in
     * whose resolved config the plugin can see, with that room's config. */
    void (*on_config_changed)(void *self, const char *room_or_null, const char *config_json); /* 1.1 */
    /* Reload hand-off: export_state runs on the old instance after its last
     * event and returns a string (host->alloc_string; the host frees it), or
     * NULL for nothing to hand over; import_state runs on the new instance
     * before its first event and returns 0, or non-zero to refuse (the
     * reload is rolled back and the old instance keeps running). */
    char *(*export_state)(void *self);                                                 /* 1.1 */
    int (*import_state)(void *self, const char *state);                                /* 1.1 */
} roomkit_plugin;

/** The entry point's type. */
typedef const roomkit_plugin *(*roomkit_plugin_entry_fn)(uint16_t host_abi_major, uint16_t host_abi_minor);

/** Whether the struct behind ptr (a roomkit_host_api or roomkit_plugin: both
 *  begin with struct_size) has member, i.e. whether the other side was built
 *  with a header that has it. Use it before calling any "1.1 and later"
 *  member of the host table: a 1.0 host's table simply ends earlier. */
#define ROOMKIT_HAS_MEMBER(ptr, member) \
    ((ptr) != NULL && (size_t)(ptr)->struct_size >= offsetof(__typeof__(*(ptr)), member) + sizeof((ptr)->member) \
     && (ptr)->member != NULL)

#if defined(__GNUC__) || defined(__clang__)
#define ROOMKIT_EXPORT __attribute__((visibility("default")))
#else
#define ROOMKIT_EXPORT
#endif

/** Declares the plugin's descriptor and its entry point in one line (the
 *  model is OBS's OBS_DECLARE_MODULE). The arguments are the descriptor's
 *  hooks as designated initializers; size and version are filled in:
 *
 *      ROOMKIT_DECLARE_PLUGIN(.on_load = on_load, .on_room_event = on_event)
 *
 *  The entry (roomkit_plugin_entry) refuses a host of another major version.
 *  A plugin built with this header declares 1.1 and so loads in 1.1 hosts
 *  and later; to load in a 1.0 host as well, define ROOMKIT_PLUGIN_TARGET_MINOR 0
 *  before including this header and check ROOMKIT_HAS_MEMBER before using
 *  anything marked 1.1. */
#ifndef ROOMKIT_PLUGIN_TARGET_MINOR
#define ROOMKIT_PLUGIN_TARGET_MINOR ROOMKIT_PLUGIN_ABI_MINOR
#endif
#define ROOMKIT_DECLARE_PLUGIN(...) \
    static roomkit_plugin roomkit_plugin_descriptor_ = { \
        .struct_size = sizeof(roomkit_plugin), \
        .abi_major = ROOMKIT_PLUGIN_ABI_MAJOR, \
        .abi_minor = ROOMKIT_PLUGIN_TARGET_MINOR, \
        __VA_ARGS__ \
    }; \
    ROOMKIT_EXPORT const roomkit_plugin *roomkit_plugin_entry(uint16_t host_abi_major, uint16_t host_abi_minor); \
    ROOMKIT_EXPORT const roomkit_plugin *roomkit_plugin_entry(uint16_t host_abi_major, uint16_t host_abi_minor) { \
        (void)host_abi_minor; \
        return host_abi_major == ROOMKIT_PLUGIN_ABI_MAJOR ? &roomkit_plugin_descriptor_ : NULL; \
    }

#ifdef __cplusplus
}
#endif

#endif /* ROOMKIT_PLUGIN_H */
