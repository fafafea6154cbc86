/* `[app NAME]` sections (master/ only): the processes of the application lagless fronts, read
 * from the configuration file key by key as the other sections are (common/value.h grammar,
 * every refusal naming the key; the caller adds FILE:LINE), then checked as a whole. The
 * master starts and supervises them (master/app.h). docs/OPERATIONS.md "Running your app under
 * lagless" describes the keys. */
#ifndef LG_MASTER_APPCONF_H
#define LG_MASTER_APPCONF_H

#include <stddef.h>
#include <stdint.h>

#define LG_APP_MAX        8    /* [app] sections */
#define LG_APP_PROCS_MAX  32   /* processes of one app */
#define LG_APP_ARGS_MAX   64   /* words of its command */
#define LG_APP_ENV_MAX    32   /* env lines of one app */
#define LG_APP_NAME       32   /* bytes of a name field, NUL included */
#define LG_APP_NAME_LEN   23   /* an app's name: 1-23 of a-z 0-9 _ - (its row in the master
                                * page, shm/layout.h struct lg_app_row, holds 24 bytes) */
#define LG_APP_STR        1024 /* bytes of a value (env, cwd, ready_path), NUL included */
#define LG_APP_CMD_LEN    8191 /* bytes of a command (a file's line may hold more:
                                * master/options.c read_line) */
#define LG_APP_CMD        (LG_APP_CMD_LEN + 1)
#define LG_APP_KEYS       13   /* keys of an [app] section (command ... probe_timeout_ms) */

struct lg_app_conf {
	char name[LG_APP_NAME];
	char command[LG_APP_CMD];  /* as written */
	char words[LG_APP_CMD];    /* the command split: argc NUL-terminated words */
	int argc;
	int processes;             /* 0: auto (the CPU budget's share, lg_appconf_auto) */
	char env[LG_APP_ENV_MAX][LG_APP_STR]; /* "KEY=VALUE" */
	int nenv;
	char cwd[LG_APP_STR];      /* "" the master's */
	char user[LG_APP_NAME];    /* "" none; honoured only when the master runs as root */
	char ready_path[LG_APP_STR]; /* "" no HTTP probe: ready once its address accepts */
	char upstream[LG_APP_NAME]; /* the [upstream] it serves; "" its own name */
	uint64_t ready_timeout_ms; /* from a start to a passed probe */
	uint64_t stop_grace_ms;    /* SIGTERM to SIGKILL */
	uint64_t start_failures;   /* deaths before ready in a row that give up */
	uint64_t live_interval_ms; /* once ready, ready_path probed this often (0: never) */
	uint64_t live_failures;    /* such probes failed in a row that restart the process */
	uint64_t probe_timeout_ms; /* one probe (readiness or liveness), connect to answer */
	int addr;                  /* LG_APP_ADDR_*: what its command names */
	char file[256];            /* where its header is, for the checks after reading */
	int line;
	int key_line[LG_APP_KEYS]; /* where each key was given (0: not given; env: its last) */
	uint32_t given;            /* bit per key, loading only */
};

/* Indexes of key_line for the keys the checks after reading name (master/appconf.c keys[]). */
enum { LG_APP_KEY_COMMAND = 0, LG_APP_KEY_CWD = 3, LG_APP_KEY_USER = 4, LG_APP_KEY_UPSTREAM = 9 };

enum { LG_APP_ADDR_NONE = 0, LG_APP_ADDR_SOCKET = 1, LG_APP_ADDR_PORT = 2 };

struct lg_apps {
	struct lg_app_conf app[LG_APP_MAX];
	int n;
};

/* Takes key = value of section at file:line when section is "app NAME": creates *apps on first
 * use (heap, owned by the caller: lg_appconf_free). Returns 1 (taken), 0 (another section), or
 * -1 with "key 'k' = 'v': reason" or "section [app x]: reason" in why (cap bytes). */
int lg_appconf_collect(struct lg_apps **apps, const char *section, const char *key,
    const char *value, const char *file, int line, char *why, size_t cap);

/* The checks once every file is read, on the text alone: each app has a command, a
 * ready_path only with an address, no two apps serve one upstream (their `upstream =`, else
 * their name: master/app.c lg_app_servers finds an app by either), and no app's `upstream =`
 * is another app's name. Returns 0, or -1 with "FILE:LINE: [app NAME]: reason" in err (cap
 * bytes). NULL passes. */
int lg_appconf_check(const struct lg_apps *apps, char *err, size_t cap);

/* The checks against this machine, as start-up will meet them (master/appproc.c child(): chdir
 * to cwd, then as root the user, then execvp): as root, `user` is a user getpwnam(3) knows; cwd
 * is an existing directory; the command's program (unless it holds {socket} or {port}) is a
 * regular file the app may execute: a path with a '/' taken from cwd, else found in the PATH
 * of its env lines, else of this process, else "/bin:/usr/bin" (execvp(3)). Relative paths are
 * taken from this process's working directory, which is the master's (it never changes it).
 * Returns 0, or -1 with "FILE:LINE: [app NAME]: key ...: reason" in err (cap bytes), LINE the
 * key's. NULL passes. */
int lg_appconf_check_host(const struct lg_apps *apps, char *err, size_t cap);

/* Splits s into words at blanks (space, tab), without a shell: '...' keeps everything
 * literally, "..." too except \" and \\, a backslash outside quotes takes the next byte; no
 * variable, glob or redirection. Writes the words NUL-terminated one after another into out
 * (cap bytes) and returns how many (at most max), or -1 with a reason in why: an unclosed
 * quote, a trailing backslash, more than max words or cap bytes. */
int lg_appconf_split(const char *s, char *out, size_t cap, int max, const char **why);

/* One word with "{socket}" and "{port}" replaced by socket and port (each occurrence) into
 * out (cap bytes). Returns 0, or -1 when the result does not fit. */
int lg_appconf_subst(const char *word, const char *socket, int port, char *out, size_t cap);

/* The processes app runs under a CPU budget of `budget` whole CPUs shared by nauto apps with
 * processes = auto: its count when given, else lg_sizing_app_share (sizing/sizing.h: half the
 * budget shared by the auto apps, the other half the loops' and the compute pool's). */
int lg_appconf_count(const struct lg_app_conf *a, int budget, int nauto);

/* How many apps of apps (NULL: none) have processes = auto. */
int lg_appconf_nauto(const struct lg_apps *apps);

/* Whether a and b start the same processes (every key but where they were written). */
int lg_appconf_same(const struct lg_app_conf *a, const struct lg_app_conf *b);

/* The socket file of process index of app under dir into out (cap bytes): DIR/NAME.SERIAL/I.sock,
 * in the run's own directory (serial: the run's number, 1 at start-up, + 1 per run started). Returns 0, or -1
 * when it does not fit a sockaddr_un (108 bytes, unix(7)). */
int lg_appconf_socket_path(const char *dir, const char *name, uint32_t serial, int index,
    char *out, size_t cap);

/* For -t: each app, its command and its processes' addresses (ports are picked at start,
 * "127.0.0.1:{port}"; the socket directory as the master chooses it, with PID for its pid),
 * one line each on fp (a FILE *). */
void lg_appconf_print(const struct lg_apps *apps, int budget, void *fp);

/* Frees apps (NULL is ignored). */
void lg_appconf_free(struct lg_apps *apps);

#endif
