/* lagless: configuration, sizing, then the master. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/version.h"
#include "kinds/registry.h"
#include "master/app.h"
#include "master/appconf.h"
#include "master/ctl.h"
#include "master/gen.h"
#include "master/runkind.h"
#include "master/master.h"
#include "master/modprobe.h"
#include "master/options.h"
#include "sizing/sizing.h"

/* For -t: whether a file the start-up writes (the error log, the pid file, a unix socket when
 * sock) could not be written, without creating it: an existing file must be writable and not
 * a directory (EISDIR), an existing socket path a socket (EEXIST, as bind(2) says; a stale
 * socket is replaced, which needs the directory), a new one a writable directory (access(2),
 * stat(2)). Sets errno. */
static int
unwritable(const char *path, int sock)
{
	char dir[256];
	struct stat st;

	if (path[0] == '\0')
		return 0;
	if (stat(path, &st) == 0) {
		if (!sock && S_ISDIR(st.st_mode))
			return errno = EISDIR, 1;
		if (sock && !S_ISSOCK(st.st_mode))
			return errno = EEXIST, 1;
		if (!sock)
			return access(path, W_OK) == -1;
	} else if (errno != ENOENT) {
		return 1;
	}
	lg_path_dir(path, dir, sizeof(dir));
	return access(dir, W_OK | X_OK) == -1;
}

/* For -t: 1, said on stderr, when `what` at path (may be "": none) is unwritable; sock as
 * unwritable's. */
static int
unwritable_file(const char *path, const char *what, int sock)
{
	if (!unwritable(path, sock))
		return 0;
	fprintf(stderr, "lagless: cannot write %s %s: %m\n", what, path);
	return 1;
}

/* For -t: 1, said on stderr, when the socket file of a unix:/path listener cannot be made. */
static int
unwritable_socket(const struct lg_config *cfg)
{
	char path[sizeof(cfg->master.listen_more[0])];

	for (int i = 0; i < LG_LISTEN_MAX && cfg->master.listen_more[i][0] != '\0'; i++)
		if (lg_listen_unix_path(cfg->master.listen_more[i], path, sizeof(path)) &&
		    unwritable_file(path, "the unix socket", 1))
			return 1;
	return 0;
}

/* Descriptors the master inherited (a shell's or supervisor's open files, sockets) would leak
 * into every worker and hold their files open: close all but 0, 1, 2 and the sockets systemd
 * passes for socket activation (SD_LISTEN_FDS_START.., LISTEN_FDS of them when LISTEN_PID is
 * ours; sd_listen_fds(3)). Runs first, before anything of ours is open. */
static void
close_inherited_fds(void)
{
	const char *pid = getenv("LISTEN_PID"), *n = getenv("LISTEN_FDS");
	unsigned long keep = 0;

	if (pid != NULL && n != NULL && strtol(pid, NULL, 10) == (long)getpid())
		keep = strtoul(n, NULL, 10);
	if (keep > 65536)
		keep = 65536;
	if (close_range(3 + (unsigned)keep, ~0u, 0) == -1) /* before Linux 5.9: one by one */
		for (long fd = 3 + (long)keep, max = sysconf(_SC_OPEN_MAX); fd < max; fd++)
			close((int)fd);
}

/* For -t: how each pool's queue-wait target must relate to its jobs' run time, which -t cannot
 * know (docs/OPERATIONS.md, admission by queue wait). */
static void
explain_queue_wait(const struct lg_config *cfg)
{
	for (int i = 0; i < cfg->jobs.npools; i++) {
		const struct lg_pool_cfg *p = &cfg->jobs.pools[i];

		if (p->queue_wait_target_ms == 0)
			continue;
		fprintf(stderr, "lagless: pool %s: queue_wait_target_ms %llu, interval %llu ms: the "
		    "target must be at least the run time of the pool's typical job and the interval "
		    "four or five run times, or admission refuses jobs well below capacity (a job "
		    "that arrives while every compute process is busy waits for one to finish; "
		    "docs/OPERATIONS.md)\n", p->name,
		    (unsigned long long)p->queue_wait_target_ms,
		    (unsigned long long)(p->queue_wait_interval_ms > p->queue_wait_target_ms ?
		    p->queue_wait_interval_ms : p->queue_wait_target_ms));
	}
}

/* A rule with scope = cluster and no --redis is local: said at start-up and by lagless -t, not
 * silently (docs/CACHE.md "Across replicas"). */
static void
warn_cluster_without_redis(const struct lg_config *cfg)
{
	if (cfg->cluster.redis[0] != '\0' || cfg->reg == NULL)
		return;
	for (uint32_t i = 0; i < cfg->reg->nroutes; i++) {
		const struct lg_route_def *rt = &cfg->reg->routes[i];

		if (rt->has_coal && rt->coal.cluster)
			log_warn("route %s has scope = cluster and no --redis is set: its keys are "
			    "shared on this server only", rt->path);
	}
}

/* The first steps of the command: the options (a refusal exits 2 for a usage error, with the
 * hint, else 1, as lagless(8) says), --help, --example and --version, then the error log.
 * Returns -1 to go on, else the exit status for main. */
static int
load_options(int argc, char **argv, struct lg_config *cfg, struct lg_command *cmd)
{
	char err[512];

	if (lg_options_load(argc, argv, cfg, cmd, err, sizeof(err)) == -1) {
		/* A wrong flag is a usage error (2, with the hint); a configuration the file, the
		 * environment or a module refuses is a failed start (1), as lagless(8) says. */
		fprintf(stderr, "lagless: %s\n%s", err, cmd->test_config ? "configuration test failed\n" :
		    cmd->signal ? "configuration test failed; reload not sent\n" :
		    cmd->usage_error ? "try 'lagless --help'\n" : "");
		return cmd->test_config || cmd->signal ? 1 : cmd->usage_error ? 2 : 1;
	}
	if (cmd->help) {
		lg_options_usage(stdout);
		return 0;
	}
	if (cmd->print_example) {
		lg_options_example(stdout);
		return 0;
	}
	if (cmd->version) {
		printf("lagless %s\n", LG_VERSION);
		return 0;
	}
	lg_log_level = cfg->master.log_level;
	if (cmd->test_config && (unwritable_file(cfg->master.error_log, "the error log", 0) ||
	    unwritable_file(cfg->master.pid_file, "the pid file", 0) || unwritable_socket(cfg))) {
		fprintf(stderr, "configuration test failed\n");
		lg_registry_free(cfg->reg);
		lg_appconf_free(cfg->master.apps);
		return 1;
	}
	if (!cmd->print_sizing && !cmd->test_config && !cmd->signal && lg_log_open(cfg->master.error_log) == -1) {
		fprintf(stderr, "lagless: cannot open the error log %s: %m\n", cfg->master.error_log);
		lg_registry_free(cfg->reg);
		lg_appconf_free(cfg->master.apps);
		return 1;
	}
	if (!cmd->print_sizing)
		lg_options_warn_env(environ); /* a misspelled setting is not silently ignored */
	if (!cmd->print_sizing && cfg->conn.access_log_json && !cfg->conn.access_log)
		log_warn("access_log_json chooses the access log's form, and access_log is off: no "
		    "access lines are written");
	if (!cmd->print_sizing)
		warn_cluster_without_redis(cfg);
	return -1;
}

/* Reads the machine and decides the sizing (CPU and memory) into *sz. Returns -1 to go on, or
 * 1 (the exit status) when the pools or the arena do not fit, said on stderr. */
static int
decide_sizing(const struct lg_config *cfg, const struct lg_command *cmd, struct lg_sizing *sz)
{
	char err[512];

	lg_sizing_read(getenv("LAGLESS_SYSROOT"), sz);
	lg_sizing_decide(sz, cfg);
	lg_gen_decide_memory(cfg, sz);
	if (lg_sizing_check_pools(sz, &cfg->jobs, err, sizeof(err)) == -1 ||
	    lg_gen_check_arena(cfg, sz, err, sizeof(err)) == -1) {
		fprintf(stderr, "lagless: %s\n%s", err, cmd->test_config ?
		    "configuration test failed\n" : cmd->signal ?
		    "configuration test failed; reload not sent\n" : "");
		return 1;
	}
	return -1;
}

/* --print-sizing and -t: the sizing JSON on stdout (note: a warning about it, or NULL), and
 * for -t the queue-wait advice, the registry, the apps (their process counts under a CPU
 * budget of `budget`) and the verdict. Frees cfg->reg and cfg->master.apps. Returns 0. */
static int
print_sizing(struct lg_config *cfg, const struct lg_command *cmd, const char *json,
    const char *note, int budget)
{
	if (cmd->test_config)
		explain_queue_wait(cfg);
	if (note != NULL)
		fprintf(stderr, "lagless: warning: %s\n", note);
	printf("%s\n", json);
	if (cmd->test_config)
		lg_registry_print(cfg->reg, stdout);
	if (cmd->test_config)
		lg_appconf_print(cfg->master.apps, budget, stdout);
	if (cmd->test_config)
		fprintf(stderr, "lagless: configuration %s is valid\n",
		    cmd->config_path ? cmd->config_path : "(flags and environment only)");
	lg_registry_free(cfg->reg);
	lg_appconf_free(cfg->master.apps);
	return 0;
}

int
main(int argc, char **argv)
{
	struct lg_config cfg;
	struct lg_command cmd;
	struct lg_sizing sz;
	char json[4096], err[512];
	int rc;

	close_inherited_fds();
	lg_log_set_role("master", 0);
	if ((rc = load_options(argc, argv, &cfg, &cmd)) >= 0)
		return rc;
	if ((rc = decide_sizing(&cfg, &cmd, &sz)) >= 0) {
		lg_registry_free(cfg.reg); /* refused: nothing more reads it (LSan) */
		lg_appconf_free(cfg.master.apps);
		return rc;
	}
	if (lg_sizing_json(&sz, json, sizeof(json)) == -1)
		snprintf(json, sizeof(json), "{}");
	if (cmd.run_kind != NULL) {
		rc = lg_runkind_main(&cfg, cmd.run_kind);
		lg_registry_free(cfg.reg);
		lg_appconf_free(cfg.master.apps);
		return rc;
	}
	if (cmd.signal != NULL) { /* -s reload: the configuration above is valid */
		rc = lg_ctl_reload(&cfg.master);
		lg_registry_free(cfg.reg);
		lg_appconf_free(cfg.master.apps);
		return rc;
	}
	if (cmd.test_config && lg_modprobe_check(cfg.reg, 60000, err, sizeof(err)) == -1) {
		fprintf(stderr, "lagless: %s\nconfiguration test failed\n", err);
		lg_registry_free(cfg.reg);
		lg_appconf_free(cfg.master.apps);
		return 1;
	}
	/* the socket directory holds the master's pid: the widest pid (pid_max 4194304) here */
	if (cmd.test_config && lg_app_check_paths(cfg.master.apps, 4194304, sz.budget, err,
	    sizeof(err)) == -1) {
		fprintf(stderr, "lagless: %s\nconfiguration test failed\n", err);
		lg_registry_free(cfg.reg);
		lg_appconf_free(cfg.master.apps);
		return 1;
	}
	char note[256];
	int noted = lg_sizing_note(&sz, note, sizeof(note));
	if (cmd.print_sizing || cmd.test_config)
		return print_sizing(&cfg, &cmd, json, noted ? note : NULL, sz.budget);
	log_info("lagless %s sizing: %s", LG_VERSION, json);
	if (noted)
		log_warn("%s", note);
	return lg_master_run(&cfg, &sz, argc, argv);
}
