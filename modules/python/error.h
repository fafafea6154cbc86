/* The python module's wording of a Python exception (error.c), used by the hooks (python.c) and
 * by one job (call.c): a leaf both include, so neither calls into the other for it. Python.h
 * comes first (pymod.h). */
#ifndef LG_PYMOD_ERROR_H
#define LG_PYMOD_ERROR_H

#include "pymod.h"

/* The current Python exception as one line, "TypeName: message" (cut to cap bytes, always
 * NUL-terminated), and, when log is non-zero, its traceback on the error log line by line
 * (prefixed with what). Clears the exception. */
void lg_python_error(const struct lg_python *py, const struct lagless_host *h, const char *what,
    int log, char *buf, size_t cap);

#endif
