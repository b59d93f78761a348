#include "CRoomKitRedis.h"
#include <hiredis/adapters/libuv.h>

int rk_redis_attach_uv(redisAsyncContext *context, void *uv_loop) {
    return redisLibuvAttach(context, (uv_loop_t *)uv_loop);
}
