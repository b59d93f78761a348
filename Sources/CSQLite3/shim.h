#ifndef ROOMKIT_CSQLITE3_SHIM_H
#define ROOMKIT_CSQLITE3_SHIM_H
#include <sqlite3.h>
#endif
