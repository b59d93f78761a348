#ifndef ROOMKIT_ECHO_COMMANDS_H
#define ROOMKIT_ECHO_COMMANDS_H
#include "roomkit_plugin.h"
/** The plugin's exported entry point (see roomkit_plugin.h). */
const roomkit_plugin *roomkit_plugin_entry(uint16_t host_major, uint16_t host_minor);
#endif
