/* Every setting of lagless, from one table: command-line flag (--name), environment variable
 * (LAGLESS_NAME, upper case, '-' as '_'), configuration file key (name with '-' as '_', INI
 * parsed by inih) and default. Precedence: flag > environment > file > default.
 * The same table drives --help, the checks of `lagless -t`, and the shipped example file. */
#ifndef LG_MASTER_OPTIONS_H
#define LG_MASTER_OPTIONS_H

#include <stddef.h>

#include "common/config.h"

#define LG_DEFAULT_CONFIG "/etc/lagless/lagless.conf"

/* What the command line asks for besides settings. */
struct lg_command {
	const char *config_path;   /* -c FILE; NULL: LG_DEFAULT_CONFIG if it exists */
	int config_given;          /* -c was given (a missing file is then an error) */
	int test_config;           /* -t: check the configuration, print the sizing, exit */
	int print_sizing;          /* --print-sizing */
	int print_example;         /* --print-example-config */
	const char *run_kind;      /* --run-kind KIND: one job on stdin, answer on stdout */
	const char *signal;        /* -s reload: signal the running master and wait for the outcome */
	int help, version;
	int usage_error;           /* set with a -1 of lg_options_load when a command-line flag
	                            * was wrong (exit 2 with a usage hint); otherwise a -1 is a
	                            * configuration error: the file, environment, a module (exit 1) */
};

/* Fills *cfg with the defaults. */
void lg_options_defaults(struct lg_config *cfg);

/* Loads the whole configuration: defaults, then the file, then LAGLESS_* variables, then the
 * flags in argv (argv is not modified; getopt state is reset so this can run again on
 * SIGHUP). On error returns -1 and writes one line into err (cap bytes) naming the source:
 * "FILE:LINE: key 'name': reason", "environment LAGLESS_X: reason" or "--flag: reason".
 * Unknown keys, flags and malformed values are errors; unknown LAGLESS_* variables are not
 * (other tools share the prefix, e.g. LAGLESS_SYSROOT). Returns 0 on success, with cfg->reg
 * the registry of kinds, modules and routes built from it (master/site.h; heap, freed with
 * lg_registry_free), NULL for --help, --version and --print-example-config. */
int lg_options_load(int argc, char *const argv[], struct lg_config *cfg, struct lg_command *cmd,
    char *err, size_t cap);

/* Logs one warning per LAGLESS_* variable of envp (NULL-terminated, e.g. environ) that names no
 * setting nor LAGLESS_SYSROOT / LAGLESS_RUN_QUERY, naming the closest known one (edit distance
 * up to 3) when there is one: a misspelled setting is otherwise silently ignored (issue 10). */
void lg_options_warn_env(char *const envp[]);

/* Writes the --help text to f. */
void lg_options_usage(void *f);

/* Writes an example configuration file: every setting with its default and a one-line
 * comment (deploy/lagless.conf is generated from it). */
void lg_options_example(void *f);

#endif
