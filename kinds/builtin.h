/* The kinds shipped with lagless (/heavy, /compress, /decompress, /hash, /verify), described
 * through the same ABI a user module uses (include/lagless/module.h): one module descriptor,
 * named "lagless", that the kind registry reads like any loaded module. */
#ifndef LG_KINDS_BUILTIN_H
#define LG_KINDS_BUILTIN_H

#include "include/lagless/module.h"

extern const struct lagless_module lg_builtin_module;

/* Commented [route] sections of the example configuration (lagless --print-example-config):
 * the default routes of these kinds with every key they take and its default. */
extern const char lg_builtin_example[];

#endif
