/* The ABI is a header; this file only gives the C target a translation unit
 * and checks at compile time that the layouts begin as documented. */
#include "roomkit_plugin.h"

_Static_assert(offsetof(roomkit_plugin, struct_size) == 0, "descriptor must begin with its size");
_Static_assert(offsetof(roomkit_host_api, struct_size) == 0, "host table must begin with its size");
