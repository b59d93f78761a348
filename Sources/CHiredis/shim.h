#ifndef ROOMKIT_CHIREDIS_SHIM_H
#define ROOMKIT_CHIREDIS_SHIM_H
// hiredis (Debian libhiredis-dev, 0.14): the synchronous and asynchronous
// APIs. The libuv adapter is attached in CRoomKitRedis, because it is a set
// of static functions in a header.
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#endif
