/*
 * roomkit_plugin.h: the RoomKit plugin ABI, version 1.0.
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
 *   - A string a hook RETURNS (url_interrupter) must be allocated with
 *     host->alloc_string; the host frees it. NULL means failure.
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
#define ROOMKIT_PLUGIN_ABI_MINOR 0
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
} roomkit_host_api;

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
} roomkit_plugin;

/** The entry point's type. */
typedef const roomkit_plugin *(*roomkit_plugin_entry_fn)(uint16_t host_abi_major, uint16_t host_abi_minor);

#ifdef __cplusplus
}
#endif

#endif /* ROOMKIT_PLUGIN_H */
