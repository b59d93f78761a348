#ifndef ROOMKIT_CLIBWEBSOCKETS_SHIM_H
#define ROOMKIT_CLIBWEBSOCKETS_SHIM_H
#include <libwebsockets.h>
#endif
