#include "CRoomKitRedis.h"
#include <hiredis/adapters/libuv.h>

/* hiredis 0.14's libuv adapter returns from its poll callback when libuv
 * reports an error status. A refused connect is exactly that: libuv sees
 * POLLERR, stops the watcher and reports an error, the adapter drops it,
 * hiredis never learns, and the attempt ends only at our connect timeout,
 * logged as "timed out" instead of "Connection refused". Later hiredis
 * releases fixed the adapter the same way as here: on an error, handle the
 * events that were being waited for, so hiredis reads the socket's error
 * (SO_ERROR) and reports it through the connect or disconnect callback.
 * The adapter's attach, event struct and cleanup are kept; only the four
 * watcher hooks are replaced, so they start the poll with this callback. */
static void rk_redis_poll(uv_poll_t *handle, int status, int events) {
    redisLibuvEvents *p = (redisLibuvEvents *)handle->data;
    int ready = status != 0 ? p->events : events;
    if (p->context != NULL && (ready & UV_READABLE)) redisAsyncHandleRead(p->context);
    if (p->context != NULL && (ready & UV_WRITABLE)) redisAsyncHandleWrite(p->context);
}

static void rk_redis_update(redisLibuvEvents *p) {
    if (p->events) uv_poll_start(&p->handle, p->events, rk_redis_poll);
    else uv_poll_stop(&p->handle);
}

static void rk_redis_add_read(void *privdata) {
    redisLibuvEvents *p = (redisLibuvEvents *)privdata;
    p->events |= UV_READABLE;
    rk_redis_update(p);
}

static void rk_redis_del_read(void *privdata) {
    redisLibuvEvents *p = (redisLibuvEvents *)privdata;
    p->events &= ~UV_READABLE;
    rk_redis_update(p);
}

static void rk_redis_add_write(void *privdata) {
    redisLibuvEvents *p = (redisLibuvEvents *)privdata;
    p->events |= UV_WRITABLE;
    rk_redis_update(p);
}

static void rk_redis_del_write(void *privdata) {
    redisLibuvEvents *p = (redisLibuvEvents *)privdata;
    p->events &= ~UV_WRITABLE;
    rk_redis_update(p);
}

int rk_redis_attach_uv(redisAsyncContext *context, void *uv_loop) {
    int status = redisLibuvAttach(context, (uv_loop_t *)uv_loop);
    if (status != REDIS_OK) return status;
    context->ev.addRead = rk_redis_add_read;
    context->ev.delRead = rk_redis_del_read;
    context->ev.addWrite = rk_redis_add_write;
    context->ev.delWrite = rk_redis_del_write;
    return REDIS_OK;
}
