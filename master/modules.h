/* Opening job modules (master/ only), before any fork. A module file is never dlopen()ed in
 * place: it is copied into a private memfd first and the copy is opened, so an `install` over
 * the configured path, or a copy still being written there, can change neither the code a
 * running process executes (its mapping is of the private copy) nor what is loaded (a copy
 * whose size or mtime changed while it was read is refused, and a truncated ELF file fails the
 * completeness check before dlopen sees it). Handles are never closed: a process of an older
 * generation may still run the code (nginx's model); a file whose contents are unchanged (same
 * size and XXH3 hash of its bytes, whatever its metadata) is not loaded again on reload. */
#ifndef LG_MASTER_MODULES_H
#define LG_MASTER_MODULES_H

#include <stddef.h>
#include <stdint.h>

#include <lagless/module.h>

/* Opens the module at path: private copy, ELF check, dlopen(RTLD_NOW | RTLD_LOCAL), then the
 * LAGLESS_MODULE_SYMBOL descriptor. Returns 0 with *handle, *desc and *content (the XXH3-64
 * of the file's bytes: what the cluster scope keys a module's answers by), or -1 with one line in
 * err naming path (cannot read, changed while read, not a complete ELF shared object,
 * dlerror()'s text for a missing library or symbol, no lagless_module symbol). */
int lg_modules_open(const char *path, void **handle, const struct lagless_module **desc,
    uint64_t *content,
    char *err, size_t cap);

/* Checks, before anything reads kinds[], that the descriptor m of the module opened as handle
 * and (when its magic and ABI major are lagless's) its whole kinds[] array (nkinds * kind_size
 * bytes, each bounded by LG_MODULE_*_MAX) lie inside readable loaded segments of that module
 * (dlinfo(3) link map + dl_iterate_phdr(3)), and so do its strings (signature, name, version,
 * each kind's name and content type, NUL-terminated there) and the ABI 1.1 declaration arrays
 * with their strings: a lying descriptor is refused, never followed. Returns 0, or -1 with one
 * line in err naming path. */
int lg_modules_check_image(void *handle, const struct lagless_module *m, const char *path,
    char *err, size_t cap);

/* Checks that buf (len bytes) is a complete ELF shared object of this machine's class: the
 * header, the program and section header tables and every loadable segment lie within len.
 * Returns 0 or -1 with the reason in err. */
int lg_modules_check_elf(const unsigned char *buf, size_t len, char *err, size_t cap);

#endif
