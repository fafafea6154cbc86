#include "master/confd.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char bad_path[PATH_MAX];

static int
by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int
wanted(const char *name)
{
	size_t n = strlen(name);

	return name[0] != '.' && n > 5 && strcmp(name + n - 5, ".conf") == 0;
}

/* dir = config_path's directory + "/conf.d" into buf (cap bytes); -1 ENAMETOOLONG. */
static int
confd_dir(const char *config_path, char *buf, size_t cap)
{
	const char *slash = strrchr(config_path, '/');
	int len = slash == NULL ? snprintf(buf, cap, "conf.d") :
	    snprintf(buf, cap, "%.*s/conf.d", (int)(slash - config_path), config_path);

	if (len < 0 || (size_t)len >= cap) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

int
lg_confd_list(const char *config_path, char ***paths, size_t *n, const char **bad)
{
	char dir[PATH_MAX], path[PATH_MAX];
	char **out = NULL;
	size_t cnt = 0;
	struct dirent *de;
	struct stat st;
	int saved;
	DIR *d;

	*paths = NULL;
	*n = 0;
	*bad = bad_path;
	if (confd_dir(config_path, dir, sizeof(dir)) == -1) {
		snprintf(bad_path, sizeof(bad_path), "%s", config_path);
		return -1;
	}
	snprintf(bad_path, sizeof(bad_path), "%s", dir);
	if ((d = opendir(dir)) == NULL)
		return errno == ENOENT ? 0 : -1;
	while ((errno = 0, de = readdir(d)) != NULL) {
		char **grown;

		if (!wanted(de->d_name))
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= sizeof(path)) {
			errno = ENAMETOOLONG;
			goto fail;
		}
		snprintf(bad_path, sizeof(bad_path), "%s", path);
		if (stat(path, &st) == -1)
			goto fail;
		if (!S_ISREG(st.st_mode)) {
			errno = EISDIR;
			goto fail;
		}
		if ((grown = realloc(out, (cnt + 1) * sizeof(*out))) == NULL)
			goto fail;
		out = grown;
		if ((out[cnt] = strdup(path)) == NULL)
			goto fail;
		cnt++;
	}
	if (errno != 0)
		goto fail;
	closedir(d);
	if (cnt > 1) /* qsort(3) takes no NULL array, even of 0 */
		qsort(out, cnt, sizeof(*out), by_name);
	*paths = out;
	*n = cnt;
	return 0;
fail:
	saved = errno;
	closedir(d);
	lg_confd_free(out, cnt);
	errno = saved;
	return -1;
}

void
lg_confd_free(char **paths, size_t n)
{
	for (size_t i = 0; paths != NULL && i < n; i++)
		free(paths[i]);
	free(paths);
}
