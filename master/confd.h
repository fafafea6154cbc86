/* The conf.d directory of a configuration file, as nginx's conf.d and PHP-FPM's php-fpm.d: the
 * files <the file's directory>/conf.d/<name>.conf, read after the file itself in the byte
 * order of their names, so that a Kubernetes ConfigMap or a package adds routes, modules and
 * settings without rewriting the main file. Every file is read by the same rules; a key given
 * in two of them is an error naming both (master/options.c). docs/OPERATIONS.md "Kubernetes". */
#ifndef LG_MASTER_CONFD_H
#define LG_MASTER_CONFD_H

#include <stddef.h>

/* Lists the files of config_path's conf.d directory whose names end in ".conf" and do not
 * start with '.' (a Kubernetes ConfigMap volume's "..data" entries), sorted by strcmp(3) of
 * their names. Symbolic links are followed, as a ConfigMap volume's entries are links; a name
 * that is not a regular file then is an error (a directory named x.conf is one). *paths gets a
 * malloc'd array of *n malloc'd strings "DIR/conf.d/NAME" (free with lg_confd_free); no conf.d
 * directory gives 0 and *n = 0. Returns 0, or -1 with errno set (opendir(3), stat(2), ENOMEM,
 * ENAMETOOLONG) and *bad naming the path that failed (static storage, until the next call). */
int lg_confd_list(const char *config_path, char ***paths, size_t *n, const char **bad);

/* Frees what lg_confd_list gave (paths may be NULL). */
void lg_confd_free(char **paths, size_t n);

#endif
