/* One-line logging on stderr, in the spirit of OpenBSD log.c.
 *
 * Line format: "<ISO-8601 UTC time> <level> <role>[<index>] pid=<pid> <func>: <message>".
 * The level test is in the macro so a disabled level costs one comparison.
 * Never call these from a signal handler (they use stdio-free write(2) but format with
 * vsnprintf, which is not async-signal-safe). */
#ifndef LG_COMMON_LOG_H
#define LG_COMMON_LOG_H

enum lg_log_level { LG_LOG_ERROR = 0, LG_LOG_WARN = 1, LG_LOG_INFO = 2, LG_LOG_DEBUG = 3 };

/* Current threshold; messages above it are dropped. Default LG_LOG_INFO. */
extern int lg_log_level;

/* Sets the role ("master", "loop", "compute") and index shown on each line; call once after
 * fork. role must be a string with static storage duration (not copied). */
void lg_log_set_role(const char *role, int index);

/* Parses "error", "warn", "info", "debug". Returns the level, or -1 if unknown. */
int lg_log_parse_level(const char *name);

/* Sends stderr (fd 2) to the file at path, opened for appending (created 0640), so every
 * process forked afterwards logs there too. path is copied (at most 255 bytes). Returns 0, or -1
 * with errno from open(2)/dup2(2) (stderr unchanged). NULL or "" keeps stderr. */
int lg_log_open(const char *path);

/* Reopens the file given to lg_log_open (after log rotation: SIGUSR1). Uses only open, dup2
 * and close, so it is async-signal-safe (signal-safety(7)) and may run in a signal handler.
 * Returns 0 (also when logging to plain stderr), or -1 with errno. */
int lg_log_reopen(void);

/* Formats and writes one line with a single write(2) (lines up to 1 KiB; longer are cut). */
void lg_log_write(int level, const char *func, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define LG_LOG_AT(lvl, ...) \
	do { if (lg_log_level >= (lvl)) lg_log_write((lvl), __func__, __VA_ARGS__); } while (0)
#define log_error(...) LG_LOG_AT(LG_LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  LG_LOG_AT(LG_LOG_WARN, __VA_ARGS__)
#define log_info(...)  LG_LOG_AT(LG_LOG_INFO, __VA_ARGS__)
#define log_debug(...) LG_LOG_AT(LG_LOG_DEBUG, __VA_ARGS__)

#endif
