#ifndef ROOMKIT_CROOMKITREDIS_H
#define ROOMKIT_CROOMKITREDIS_H
#include <hiredis/hiredis.h>
#include <hiredis/async.h>

/// Attaches hiredis's libuv adapter (hiredis/adapters/libuv.h, static
/// functions in a header that Swift cannot take the address of) to `uv_loop` (a uv_loop_t *,
/// passed untyped so Swift callers need not import libuv).
/// Call on the loop thread right after redisAsyncConnect. Returns REDIS_OK
/// or REDIS_ERR. The adapter's uv_poll_t is closed (and freed in its close
/// callback) by hiredis's cleanup when the context is freed.
int rk_redis_attach_uv(redisAsyncContext *context, void *uv_loop);

/// REDIS_OK / REDIS_ERR and the reply types, as plain ints for Swift.
enum {
    RK_REDIS_OK = REDIS_OK,
    RK_REDIS_ERR = REDIS_ERR,
    RK_REDIS_REPLY_STRING = REDIS_REPLY_STRING,
    RK_REDIS_REPLY_ARRAY = REDIS_REPLY_ARRAY,
    RK_REDIS_REPLY_INTEGER = REDIS_REPLY_INTEGER,
    RK_REDIS_REPLY_NIL = REDIS_REPLY_NIL,
    RK_REDIS_REPLY_STATUS = REDIS_REPLY_STATUS,
    RK_REDIS_REPLY_ERROR = REDIS_REPLY_ERROR,
};
#endif
