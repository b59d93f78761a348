#ifndef ROOMKIT_CLIBUV_SHIM_H
#define ROOMKIT_CLIBUV_SHIM_H
#include <uv.h>
#endif
