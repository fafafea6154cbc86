#include "master/options.h"

#include <errno.h>
#include <getopt.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <strings.h>
#include <unistd.h>

#include "common/log.h"
#include "common/strdist.h"
#include "kinds/builtin.h"
#include "master/appconf.h"
#include "master/confd.h"
#include "master/iniline.h"
#include "master/master.h"
#include "master/optset.h"
#include "master/opttab.h"
#include "master/site.h"



static int resolve_pools(struct lg_config *cfg, char *err, size_t cap);

void
lg_options_defaults(struct lg_config *cfg)
{
	const char *why;

	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < LG_NOPTS; i++)
		if (lg_opts[i].def != NULL)
			lg_optset_apply(&lg_opts[i], lg_opts[i].def, cfg, &why);
	cfg->jobs.queue_capacity = -1;
	cfg->master.drain_delay_ms = LG_DRAIN_DELAY_AUTO;
	cfg->master.backlog = 4096;
	cfg->jobs.compute_nice = 5;
	cfg->jobs.npools = 1;
	snprintf(cfg->jobs.pools[0].name, sizeof(cfg->jobs.pools[0].name), "default");
	resolve_pools(cfg, NULL, 0); /* the default pool alone cannot fail */
}

static const struct lg_opt *
find_opt(const char *name, char dash)
{
	for (size_t i = 0; i < LG_NOPTS; i++) {
		const char *a = lg_opts[i].name, *b = name;

		while (*a && (*a == *b || (*a == '-' && *b == dash)))
			a++, b++;
		if (*a == '\0' && *b == '\0')
			return &lg_opts[i];
	}
	return NULL;
}

struct file_ctx {
	struct lg_config *cfg;
	struct lg_site_src *site; /* [route] and [module] sections */
	const char *path;  /* the file being read: the main one, then each conf.d file */
	FILE *fp;
	int line;          /* of the line inih last read */
	int sect_line;     /* of the last section header read */
	char sect[80];     /* its name when it is a [route], [pool], [module] or [app] one, else "" */
	int sect_keys;     /* keys the handler was given since that header */
	char *lbuf;        /* read_line's getline buffer (freed by load_file) */
	size_t lcap;
	struct lg_iniline lval; /* the value of a line longer than inih's buffer (freed by
	                         * load_file) */
	int bad_line;      /* the error is at why_line, not where inih stopped (read_line refused
	                    * a line, or a section header is to blame) */
	char why[400];     /* the first error of a handler, formatted */
	int why_line;      /* the line of that error */
	struct seen_key {      /* top-level and [pool] keys, over the main file and conf.d */
		char key[96];
		int line;
		const char *file;
	} seen[256];
	int nseen;
};

/* Was key `name` of `section` given before, in this file or an earlier one (the main file
 * before conf.d)? ([lagless] is the top level; '-' and '_' are the same in a key.) Records it
 * otherwise, with fc->path. Returns where it was, or NULL. A key is given once, as in a [route]
 * or [module] section (master/site.c): a repeat is more likely a mistake than an override, and
 * the last one winning in silence hides it, the more so across files. */
static const struct seen_key *
seen_before(struct file_ctx *fc, const char *section, const char *name)
{
	char key[96];
	int n = snprintf(key, sizeof(key), "%s]%s", strcmp(section, "lagless") == 0 ? "" : section,
	    name);

	for (int i = 0; i < n && i < (int)sizeof(key); i++)
		if (key[i] == '-')
			key[i] = '_';
	for (int i = 0; i < fc->nseen; i++)
		if (strcmp(fc->seen[i].key, key) == 0)
			return &fc->seen[i];
	if (fc->nseen < (int)(sizeof(fc->seen) / sizeof(fc->seen[0]))) {
		snprintf(fc->seen[fc->nseen].key, sizeof(fc->seen[0].key), "%s", key);
		fc->seen[fc->nseen].file = fc->path;
		fc->seen[fc->nseen++].line = fc->line;
	}
	return NULL;
}

#define POOL_CHARS "abcdefghijklmnopqrstuvwxyz0123456789_-" /* of a pool's name */
#define POOL_NAME_RULE "a pool name is 1 to 31 of a-z, 0-9, _ and -"

#define UNKNOWN_SECTION "unknown section (use [lagless], [route /path], [module name], " \
	"[pool NAME], [upstream NAME], [app NAME] or none)"

/* Is the header whose name starts at h (past its '[', up to ']' or the line's end) one of the
 * sections a file may hold? inih calls the handler only for keys, so without this an unknown
 * section with no keys (a typo such as [poolx]) would pass -t in silence. Their contents are
 * checked where they are read (pool_of, lg_site_collect). */
static int
known_section(const char *h)
{
	size_t n = strcspn(h, "]\r\n");

	return (n == 7 && strncmp(h, "lagless", 7) == 0) || strncmp(h, "pool ", 5) == 0 ||
	    strncmp(h, "route ", 6) == 0 || strncmp(h, "module ", 7) == 0 ||
	    strncmp(h, "upstream ", 9) == 0 || strncmp(h, "app ", 4) == 0;
}

/* Whether the [route], [pool] or [module] section read last (fc->sect) had no key: such a
 * section does nothing (inih calls the handler only for a key), which hides a mistake, so it
 * is refused at its header with what it lacks (the reason in fc->why, fc->bad_line set). */
static int
empty_section(struct file_ctx *fc)
{
	const char *s = fc->sect;

	if (s[0] == '\0' || fc->sect_keys > 0)
		return 0;
	if (fc->why[0] == '\0') {
		snprintf(fc->why, sizeof(fc->why), strncmp(s, "route ", 6) == 0 ?
		    "%s: needs kind = ... or handler = ... (a section without keys)" :
		    strncmp(s, "module ", 7) == 0 ? "%s: no 'path' key (the .so file)" :
		    strncmp(s, "upstream ", 9) == 0 ? "[%s]: a section without keys: give it its "
		    "server = ... lines, or app = NAME to take an app's processes" :
		    strncmp(s, "app ", 4) == 0 ? "[%s]: command = ... is required (a section "
		    "without keys)" :
		    "[%s]: compute = N or P%% is required (a section without keys)", s);
		fc->why_line = fc->sect_line;
	}
	fc->bad_line = 1;
	return 1;
}

/* Refuses fc's line for why (a format taking the limit, lim): fc->bad_line, the reason in
 * fc->why unless an earlier one is there. Returns NULL (the reader's end). */
static char *
refuse_line(struct file_ctx *fc, const char *why, int lim)
{
	if (fc->why[0] == '\0') {
		snprintf(fc->why, sizeof(fc->why), why, lim);
		fc->why_line = fc->line;
	}
	fc->bad_line = 1;
	return NULL;
}

/* inih's reader (fgets-like), counting lines so that route and module keys keep theirs.
 * inih reads at most size - 1 bytes of a line (INI_MAX_LINE, 200 in Debian's libinih) and
 * parses the rest as a line of its own: a longer line is shortened, its value kept aside
 * (master/iniline.h). A NUL byte would cut a value short in silence, and a line over
 * LG_INILINE_MAX is no configuration: such a line is refused here (fc->bad_line, the reason in
 * fc->why) and reading stops. */
static char *
read_line(char *buf, int size, void *stream)
{
	struct file_ctx *fc = stream;
	ssize_t n = getline(&fc->lbuf, &fc->lcap, fc->fp);
	const char *why = NULL, *h;
	char *out;
	size_t pn;

	if (n <= 0) {
		(void)empty_section(fc);
		return NULL;
	}
	fc->line++;
	h = fc->lbuf + strspn(fc->lbuf, " \t");
	pn = strncmp(h, "[pool ", 6) == 0 ? strcspn(h + 6, "]\r\n") : SIZE_MAX;
	if (memchr(fc->lbuf, '\0', (size_t)n) != NULL)
		return refuse_line(fc, "a NUL byte in the line", 0);
	if (n - (fc->lbuf[n - 1] == '\n') > LG_INILINE_MAX)
		return refuse_line(fc, "a line over %d bytes (the most a line of the file may hold)",
		    LG_INILINE_MAX);
	if (n > size - 1)
		return (out = lg_iniline_shorten(&fc->lval, fc->lbuf, fc->line, buf, size, &why)) !=
		    NULL ? out : refuse_line(fc, why, size - 2);
	if (pn != SIZE_MAX && h[6 + pn] == ']' && (pn == 0 || pn >= LG_POOL_NAME ||
	    strspn(h + 6, POOL_CHARS) < pn)) { /* refused at its header, even without keys */
		if (fc->why[0] == '\0') {
			snprintf(fc->why, sizeof(fc->why), "section [pool %.*s]: %s", (int)pn, h + 6,
			    POOL_NAME_RULE);
			fc->why_line = fc->line;
		}
		fc->bad_line = 1;
		return NULL;
	}
	if (*h == '[' && !known_section(h + 1)) { /* refused at its header, even without keys */
		if (fc->why[0] == '\0') {
			snprintf(fc->why, sizeof(fc->why), "section [%.*s]: %s", (int)strcspn(h + 1,
			    "]\r\n"), h + 1, UNKNOWN_SECTION);
			fc->why_line = fc->line;
		}
		fc->bad_line = 1;
		return NULL;
	}
	if (*h == '[') { /* a section header: the one before it had its keys */
		if (empty_section(fc))
			return NULL;
		fc->sect_line = fc->line;
		fc->sect_keys = 0;
		snprintf(fc->sect, sizeof(fc->sect), "%.*s", (int)strcspn(h + 1, "]\r\n"), h + 1);
		if (strcmp(fc->sect, "lagless") == 0 || strcmp(fc->sect, "pool default") == 0)
			fc->sect[0] = '\0'; /* the server-wide settings: empty, they are the defaults */
	}
	memcpy(buf, fc->lbuf, (size_t)n + 1);
	return buf;
}

/* The pool named by section "pool NAME" (NAME: 1-31 of a-z 0-9 _ -), created on first use;
 * "default" is pools[0]. NULL with a reason when the name is bad or there are too many. */
static struct lg_pool_cfg *
pool_of(struct lg_config *cfg, const char *section, const char **why)
{
	const char *name = section + 5;
	size_t n = strlen(name);

	if (n == 0 || n >= LG_POOL_NAME || name[strspn(name, POOL_CHARS)]) {
		*why = POOL_NAME_RULE;
		return NULL;
	}
	for (int i = 0; i < cfg->jobs.npools; i++)
		if (strcmp(cfg->jobs.pools[i].name, name) == 0)
			return &cfg->jobs.pools[i];
	if (cfg->jobs.npools >= LG_MAX_POOLS) {
		*why = "too many pools (at most " LG_LIMIT_STR(LG_MAX_POOLS) ", default included)";
		return NULL;
	}
	struct lg_pool_cfg *p = &cfg->jobs.pools[cfg->jobs.npools++];
	memset(p, 0, sizeof(*p));
	memcpy(p->name, name, n + 1);
	return p;
}

/* key = value in [pool NAME], pool p (pool_of). A key of [pool default] that stands for a server-wide setting
 * is that setting's file value (flags and environment still win). Returns 0 or -1 + why. */
static int
pool_key(struct lg_config *cfg, struct lg_pool_cfg *p, const char *name, const char *value,
    const char **why)
{
	for (size_t k = 0; k < LG_NPOOL_OPTS; k++) {
		const struct lg_pool_opt *po = &lg_pool_opts[k];
		const char *a = po->o.name, *b = name;

		while (*a && (*a == *b || (*a == '-' && *b == '_')))
			a++, b++;
		if (*a != '\0' || *b != '\0')
			continue;
		p->given |= 1u << k;
		if (po->o.kind == K_POOL_COMPUTE && strspn(value, "0") == strlen(value)) {
			/* compute-workers = 0 sizes from the CPU budget, so [pool default] compute = 0
			 * was taken as max(1, budget - 1) in silence: a pool's count is refused */
			*why = "a pool runs at least 1 compute process (to size the default pool from "
			    "the CPU budget, leave compute out of [pool default])";
			return -1;
		}
		if (p == &cfg->jobs.pools[0] && po->global != NULL)
			return lg_optset_apply(find_opt(po->global, '-'), value, cfg, why);
		return lg_optset_apply(&po->o, value, p, why);
	}
	*why = "unknown key of a [pool] section";
	return -1;
}

/* One key of the file (returns non-zero on success). Keys may sit before any section, in a
 * [lagless] section or in [pool NAME] sections ([route] and [module] go to master/site.c);
 * read_line has refused every other section header, so a typo never passes silently. */
static int
key_handler(struct file_ctx *fc, const char *section, const char *name, const char *value)
{
	const struct lg_opt *o;
	const char *why = "unknown key";

	fc->sect_keys++;
	char swhy[400];
	int taken = lg_site_collect(fc->site, section, name, value, fc->line, swhy, sizeof(swhy));

	if (taken == 0) /* [app NAME]: master/appconf.h */
		taken = lg_appconf_collect(&fc->cfg->master.apps, section, name, value, fc->path, fc->line,
		    swhy, sizeof(swhy));

	if (taken == 1)
		return 1;
	if (taken == -1) {
		if (fc->why[0] == '\0') {
			snprintf(fc->why, sizeof(fc->why), "%s", swhy);
			fc->why_line = fc->line;
		}
		return 0;
	}
	const struct seen_key *before = seen_before(fc, section, name);

	if (before != NULL) {
		if (fc->why[0] == '\0') {
			int same = strcmp(before->file, fc->path) == 0;

			snprintf(fc->why, sizeof(fc->why), "key '%s' given twice%s%s%s (%s%s%d; a key "
			    "is given once)", name, *section ? " in [" : "", section, *section ? "]" : "",
			    same ? "line " : before->file, same ? "" : ":", before->line);
			fc->why_line = fc->line;
		}
		return 0;
	}
	if (strncmp(section, "pool ", 5) == 0) {
		struct lg_pool_cfg *p = pool_of(fc->cfg, section, &why);

		if (p == NULL) { /* the section's fault, not the key's: blame its header */
			if (fc->why[0] == '\0') {
				snprintf(fc->why, sizeof(fc->why), "section [%s]: %s", section, why);
				fc->why_line = fc->sect_line;
				fc->bad_line = 1;
			}
			return 0;
		}
		if (pool_key(fc->cfg, p, name, value, &why) == 0)
			return 1;
	} else if ((o = find_opt(name, '_')) != NULL && lg_optset_apply(o, value, fc->cfg, &why) == 0)
		return 1;
	if (fc->why[0] == '\0') {
		snprintf(fc->why, sizeof(fc->why), "key '%s' = '%.*s%s': %s", name, LG_CLIP(value),
		    why);
		fc->why_line = fc->line;
	}
	return 0;
}

/* inih handler (returns non-zero on success): key_handler with the value the file holds
 * (master/iniline.h: a long line's value kept aside). */
static int
file_handler(void *user, const char *section, const char *name, const char *value)
{
	struct file_ctx *fc = user;
	char *joined;
	const char *v = lg_iniline_value(&fc->lval, fc->line, value, &joined);
	int rc;

	if (v == NULL) {
		if (fc->why[0] == '\0') {
			snprintf(fc->why, sizeof(fc->why), "out of memory");
			fc->why_line = fc->line;
		}
		return 0;
	}
	rc = key_handler(fc, section, name, v);
	free(joined);
	return rc;
}

/* Reads one file into fc (its settings, its sites, its keys for the repeat check), fc->path
 * being that file. Returns 0, or -1 with "FILE:LINE: reason" in err. */
static int
parse_file(struct file_ctx *fc, char *err, size_t cap)
{
	const char *path = fc->path;
	int line;

	fc->line = fc->sect_line = fc->sect_keys = fc->bad_line = fc->why_line = fc->lval.line = 0;
	fc->sect[0] = fc->why[0] = '\0';
	if ((fc->fp = fopen(path, "r")) == NULL)
		line = -1;
	else
		line = ini_parse_stream(read_line, fc, file_handler, fc);
	if (fc->fp != NULL)
		fclose(fc->fp);
	fc->fp = NULL;
	if (fc->bad_line && (line == 0 || line > fc->why_line))
		line = fc->why_line;
	if (line == 0)
		return 0;
	if (line < 0)
		snprintf(err, cap, "%s: cannot read the configuration file: %s", path,
		    line == -1 ? strerror(errno) : "out of memory");
	else if (fc->why[0] != '\0' && fc->why_line == line)
		snprintf(err, cap, "%s:%d: %s", path, line, fc->why);
	else /* inih's own: the first error it returns is an earlier line than any key's */
		snprintf(err, cap, "%s:%d: syntax error: a section header without ']', or a line that "
		    "is not 'key = value'", path, line);
	return -1;
}

/* The configuration file at path, then the files of its conf.d directory in name order
 * (master/confd.h), into cfg and a new *site. Absent and not required: nothing read. */
static int
load_file(const char *path, int required, struct lg_config *cfg, struct lg_site_src **site,
    char *err, size_t cap)
{
	struct file_ctx fc = { .cfg = cfg, .path = path };
	char **more = NULL;
	size_t nmore = 0;
	const char *bad;
	struct stat st;
	int rc = -1;

	if (!required && access(path, F_OK) == -1)
		return 0;
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		snprintf(err, cap, "%s: the configuration file is not a regular file", path);
		return -1;
	}
	if ((fc.site = *site = lg_site_new(path)) == NULL) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	if (parse_file(&fc, err, cap) == -1)
		goto out;
	if (lg_confd_list(path, &more, &nmore, &bad) == -1) {
		snprintf(err, cap, "%s: cannot read the conf.d file: %s", bad, errno == EISDIR ?
		    "not a regular file" : strerror(errno));
		goto out;
	}
	for (size_t i = 0; i < nmore; i++) {
		fc.path = more[i];
		if (lg_site_file(fc.site, more[i]) == -1) {
			snprintf(err, cap, "out of memory");
			goto out;
		}
		if (parse_file(&fc, err, cap) == -1)
			goto out;
	}
	rc = 0;
out:
	free(fc.lbuf);
	lg_iniline_free(&fc.lval);
	lg_confd_free(more, nmore);
	return rc;
}

/* name = LAGLESS_ + the flag upper-cased, '-' as '_' (64 bytes). */
static void
env_name(const struct lg_opt *o, char name[64])
{
	size_t n = strlen(strcpy(name, "LAGLESS_"));

	for (const char *p = o->name; *p && n < 63; p++)
		name[n++] = *p == '-' ? '_' : (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
	name[n] = '\0';
}

void
lg_options_warn_env(char *const envp[])
{
	static const char *const other[] = { "LAGLESS_SYSROOT", "LAGLESS_RUN_QUERY" };

	for (; *envp != NULL; envp++) {
		char var[64], name[64], best[64] = "";
		size_t len = strcspn(*envp, "="), bestd = 4, known = 0;

		if (strncmp(*envp, "LAGLESS_", 8) != 0 || len >= sizeof(var))
			continue;
		memcpy(var, *envp, len);
		var[len] = '\0';
		for (size_t i = 0; i < LG_NOPTS + 2 && !known; i++) {
			if (i < LG_NOPTS)
				env_name(&lg_opts[i], name);
			else
				strcpy(name, other[i - LG_NOPTS]);
			size_t d = lg_str_distance(var, name);
			known = d == 0;
			if (d < bestd)
				bestd = d, strcpy(best, name);
		}
		if (!known)
			log_warn("unknown environment variable %s ignored%s%s%s", var,
			    best[0] ? " (did you mean " : "", best, best[0] ? "?)" : "");
	}
}

static int
load_env(struct lg_config *cfg, char *err, size_t cap)
{
	for (size_t i = 0; i < LG_NOPTS; i++) {
		char name[64];
		const char *v, *why;

		env_name(&lg_opts[i], name);
		if ((v = getenv(name)) != NULL && lg_optset_apply(&lg_opts[i], v, cfg, &why) == -1) {
			snprintf(err, cap, "environment %s='%s': %s", name, v, why);
			return -1;
		}
	}
	return 0;
}

#define GIVEN(p, key) ((p)->given & (1u << pool_key_index(key)))

static size_t
pool_key_index(const char *key)
{
	for (size_t k = 0; k < LG_NPOOL_OPTS; k++)
		if (strcmp(lg_pool_opts[k].o.name, key) == 0)
			return k;
	return 31;
}

/* Every pool setting a section left out takes the server-wide one, once the file, the
 * environment and the flags are all in; the default pool is the server-wide settings. A named
 * pool must say how many compute processes it has. */
static int
resolve_pools(struct lg_config *cfg, char *err, size_t cap)
{
	for (int i = 0; i < cfg->jobs.npools; i++) {
		struct lg_pool_cfg *p = &cfg->jobs.pools[i];

		if (i == 0) {
			p->compute = cfg->jobs.compute_workers;
			p->share = cfg->jobs.compute_share;
			p->queue = cfg->jobs.queue_capacity;
		} else if (!GIVEN(p, "compute")) {
			snprintf(err, cap, "[pool %s]: compute = N or P%% is required", p->name);
			return -1;
		} else if (!GIVEN(p, "queue")) {
			p->queue = -1;
		}
		if (i == 0 || !GIVEN(p, "deadline-ms"))
			p->deadline_ms = cfg->jobs.deadline_ms;
		if (i == 0 || !GIVEN(p, "on-client-gone"))
			p->on_client_gone = cfg->jobs.on_client_gone;
		if (i == 0 || !GIVEN(p, "queue-wait-target-ms"))
			p->queue_wait_target_ms = cfg->jobs.queue_wait_target_ms;
		if (i == 0 || !GIVEN(p, "queue-wait-interval-ms"))
			p->queue_wait_interval_ms = cfg->jobs.queue_wait_interval_ms;
		if (!GIVEN(p, "nice"))
			p->nice = cfg->jobs.compute_nice;
		if (i == 0 || !GIVEN(p, "policy"))
			p->policy = cfg->jobs.compute_policy;
		if (i == 0 || !GIVEN(p, "slice-ms"))
			p->slice_ms = cfg->jobs.compute_slice_ms;
		if (i == 0 || !GIVEN(p, "memory"))
			p->memory = cfg->jobs.compute_memory;
		if (i == 0 || !GIVEN(p, "max-jobs"))
			p->max_jobs = cfg->jobs.compute_max_jobs;
		if (i == 0 || !GIVEN(p, "max-rss"))
			p->max_rss = cfg->jobs.compute_max_rss;
	}
	return 0;
}

enum { OPT_RUN_KIND = 998, OPT_PRINT_EXAMPLE = 999, OPT_PRINT_SIZING = 1000, OPT_FIRST = 1001 };

static void
build_longopts(struct option *lo)
{
	size_t n = 0;

	for (size_t i = 0; i < LG_NOPTS; i++)
		lo[n++] = (struct option){ lg_opts[i].name, lg_opts[i].kind == K_BOOL ? optional_argument :
		    required_argument, NULL, OPT_FIRST + (int)i };
	lo[n++] = (struct option){ "print-sizing", no_argument, NULL, OPT_PRINT_SIZING };
	lo[n++] = (struct option){ "print-example-config", no_argument, NULL, OPT_PRINT_EXAMPLE };
	lo[n++] = (struct option){ "run-kind", required_argument, NULL, OPT_RUN_KIND };
	lo[n++] = (struct option){ "config", required_argument, NULL, 'c' };
	lo[n++] = (struct option){ "test-config", no_argument, NULL, 't' };
	lo[n++] = (struct option){ "signal", required_argument, NULL, 's' };
	lo[n++] = (struct option){ "help", no_argument, NULL, 'h' };
	lo[n++] = (struct option){ "version", no_argument, NULL, 'V' };
	lo[n] = (struct option){ NULL, 0, NULL, 0 };
}

/* One getopt pass. pass 0 reads the commands (-c, -t, ...), pass 1 applies the settings. */
static int
load_flags(int argc, char *const argv[], int pass, struct lg_config *cfg,
    struct lg_command *cmd, char *err, size_t cap)
{
	struct option lo[LG_NOPTS + 9];
	int c, nlisten = 0;

	build_longopts(lo);
	optind = 0; /* GNU: full re-initialisation, so a reload can parse again */
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":p:c:s:thV", lo, NULL)) != -1) {
		const struct lg_opt *o = c == 'p' ? find_opt("port", '-') :
		    c >= OPT_FIRST ? &lg_opts[c - OPT_FIRST] : NULL;
		const char *why;

		if (c == '?' || c == ':') {
			snprintf(err, cap, "%s: %s", argv[optind - 1],
			    c == '?' ? "unknown option" : "missing value");
			return -1;
		}
		if (pass == 0) {
			cmd->config_path = c == 'c' ? optarg : cmd->config_path;
			cmd->config_given |= c == 'c';
			cmd->test_config |= c == 't';
			cmd->print_sizing |= c == OPT_PRINT_SIZING;
			cmd->print_example |= c == OPT_PRINT_EXAMPLE;
			cmd->run_kind = c == OPT_RUN_KIND ? optarg : cmd->run_kind;
			cmd->signal = c == 's' ? optarg : cmd->signal;
			cmd->help |= c == 'h';
			cmd->version |= c == 'V';
		} else if (o != NULL && o->kind == K_LISTEN && nlisten++ > 0) {
			/* a repeated --listen adds listeners (it replaced the first in silence) */
			if (lg_listen_parse(optarg, cfg, 1) == -1) {
				lg_optset_apply(o, "", cfg, &why); /* only for the reason text */
				snprintf(err, cap, "--%s '%s': %s", o->name, optarg, why);
				return -1;
			}
		} else if (o != NULL && lg_optset_apply(o, optarg ? optarg : "yes", cfg, &why) == -1) {
			snprintf(err, cap, "--%s '%s': %s", o->name, optarg ? optarg : "", why);
			return -1;
		}
	}
	if (optind < argc) {
		snprintf(err, cap, "unexpected argument '%s'", argv[optind]);
		return -1;
	}
	return 0;
}

int
lg_options_load(int argc, char *const argv[], struct lg_config *cfg, struct lg_command *cmd,
    char *err, size_t cap)
{
	memset(cmd, 0, sizeof(*cmd));
	lg_options_defaults(cfg);
	err[0] = '\0';
	if (load_flags(argc, argv, 0, cfg, cmd, err, cap) == -1) {
		cmd->usage_error = 1;
		return -1;
	}
	if (cmd->help || cmd->version || cmd->print_example)
		return 0;
	if (cmd->signal != NULL && strcmp(cmd->signal, "reload") != 0) {
		snprintf(err, cap, "-s '%s': expected reload", cmd->signal);
		return -1;
	}
	struct lg_site_src *site = NULL;
	if (load_file(cmd->config_given ? cmd->config_path : LG_DEFAULT_CONFIG, cmd->config_given,
	    cfg, &site, err, cap) == -1) {
		lg_site_free(site);
		lg_appconf_free(cfg->master.apps);
		cfg->master.apps = NULL;
		return -1;
	}
	if (!cmd->config_given && access(LG_DEFAULT_CONFIG, F_OK) == 0)
		cmd->config_path = LG_DEFAULT_CONFIG;
	if (load_env(cfg, err, cap) == -1) {
		lg_site_free(site);
		lg_appconf_free(cfg->master.apps);
		cfg->master.apps = NULL;
		return -1;
	}
	if (load_flags(argc, argv, 1, cfg, cmd, err, cap) == -1) {
		cmd->usage_error = 1;
		lg_site_free(site);
		lg_appconf_free(cfg->master.apps);
		cfg->master.apps = NULL;
		return -1;
	}
	if (lg_listen_check_distinct(cfg, err, cap) == -1 ||
	    lg_listen_check_proxy(cfg, err, cap) == -1 || resolve_pools(cfg, err, cap) == -1 ||
	    lg_appconf_check(cfg->master.apps, err, cap) == -1 ||
	    lg_appconf_check_host(cfg->master.apps, err, cap) == -1) {
		lg_site_free(site);
		lg_appconf_free(cfg->master.apps);
		cfg->master.apps = NULL;
		return -1;
	}
	for (int i = 0; cfg->master.apps != NULL && i < cfg->master.apps->n; i++) { /* for the sizing */
		cfg->master.app_fixed += cfg->master.apps->app[i].processes;
		cfg->master.app_auto += cfg->master.apps->app[i].processes == 0;
	}
	if (lg_site_build(site, cfg, err, cap) == -1) {
		lg_appconf_free(cfg->master.apps);
		cfg->master.apps = NULL;
		return -1;
	}
	return 0;
}

void
lg_options_usage(void *fp)
{
	FILE *f = fp;

	fprintf(f, "usage: lagless [-c FILE] [-t | -s reload] [--print-sizing] [options]\n\n"
	    "  -c, --config FILE          configuration file (default %s if present)\n"
	    "  -t, --test-config          check the configuration, print the sizing, exit 0 or 1\n"
	    "  -s, --signal reload        check the configuration, reload the server of --pid-file,\n"
	    "                             wait: exit 0 once the new one accepts, 1 with the reason,\n"
	    "                             2 when the pid file names no running master\n"
	    "  --print-sizing             print the CPU sizing inputs and decision as JSON, exit\n"
	    "  --print-example-config     print a configuration file with every default, exit\n"
	    "  --run-kind KIND            run one job of KIND (heavy, module.kind) on standard input,\n"
	    "                             its answer on standard output, no server; exit 0 or 1\n"
	    "  -h, --help                 this text\n"
	    "  -V, --version              print the version and exit\n\n"
	    "settings (flag > environment LAGLESS_<NAME> > file key <name> > default):\n",
	    LG_DEFAULT_CONFIG);
	for (size_t i = 0; i < LG_NOPTS; i++) {
		char flag[64];

		snprintf(flag, sizeof(flag), "%s--%s%s%s", strcmp(lg_opts[i].name, "port") ? "" : "-p, ",
		    lg_opts[i].name, lg_opts[i].kind == K_BOOL ? "" : " ", lg_opts[i].arg);
		int has_def = lg_opts[i].def != NULL && lg_opts[i].def[0] != '\0';

		fprintf(f, "  %-26s %s%s%s%s\n", flag, lg_opts[i].help, has_def ? " (default " : "",
		    has_def ? lg_opts[i].def : "", has_def ? ")" : "");
	}
	fprintf(f, "\nenvironment: LAGLESS_SYSROOT prefixes every /proc and /sys path the sizing reads\n"
	    "signals: SIGTERM/SIGINT graceful drain (after --drain-delay-ms), SIGQUIT immediate\n"
	    "         stop, SIGHUP reload (lagless -s reload waits for its outcome),\n"
	    "         SIGUSR1 reopen the error log\n");
}

void
lg_options_example(void *fp)
{
	FILE *f = fp;

	fprintf(f, "; lagless configuration: every setting with its default, but demo_routes: the\n"
	    "; built-in kinds' demonstration routes are no part of a deployed server.\n"
	    "; Keys may also be given as flags (--key-name) or environment variables\n"
	    "; (LAGLESS_KEY_NAME); precedence: flag > environment > this file > default.\n"
	    "[lagless]\n");
	for (size_t i = 0; i < LG_NOPTS; i++) {
		char key[64];
		size_t n = 0;

		for (const char *p = lg_opts[i].name; *p && n < sizeof(key) - 1; p++)
			key[n++] = *p == '-' ? '_' : *p;
		key[n] = '\0';
		if (strcmp(key, "demo_routes") == 0) {
			fprintf(f, "\n; %s (default yes)\n%s = no\n", lg_opts[i].help, key);
			continue;
		}
		fprintf(f, "\n; %s\n%s%s = %s\n", lg_opts[i].help, lg_opts[i].def ? "" : ";", key,
		    lg_opts[i].def ? lg_opts[i].def : "");
	}
	fputs(lg_builtin_example, f);
}
