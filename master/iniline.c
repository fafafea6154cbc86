#include "master/iniline.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define MARK "\x01" /* ends a stand-in's value; lg_iniline_value looks for it only on the line
                     * shortened, so a short line's own bytes are never taken for it */

/* As inih's own (ini.c, INI_INLINE_COMMENT_PREFIXES ";"): in s, the first byte of chars
 * (NULL: none), or a ';' after a blank (an inline comment), or s's end. */
static const char *
find_chars_or_comment(const char *s, const char *chars)
{
	int was_space = 0;

	while (*s && (chars == NULL || strchr(chars, *s) == NULL) && !(was_space && *s == ';')) {
		was_space = isspace((unsigned char)*s);
		s++;
	}
	return s;
}

char *
lg_iniline_shorten(struct lg_iniline *l, const char *line, int lineno, char *buf, int size,
    const char **why)
{
	const char *s = line, *d, *v, *e;
	size_t k, n;

	if (lineno == 1 && strncmp(s, "\xEF\xBB\xBF", 3) == 0)
		s += 3;
	while (isspace((unsigned char)*s))
		s++;
	if (*s == ';' || *s == '#') {
		memcpy(buf, ";\n", 3);
		return buf;
	}
	*why = "a section header over the parser's limit of %d bytes";
	if (*s == '[')
		return NULL;
	d = find_chars_or_comment(s, "=:");
	*why = "a line over the parser's limit of %d bytes that is not 'key = value' (only a "
	    "value may be longer)";
	if (*d != '=' && *d != ':')
		return NULL;
	k = (size_t)(d + 1 - line);
	*why = "a key over the parser's limit of %d bytes (only a value may be longer)";
	if (k + sizeof(" " MARK "\n") > (size_t)size)
		return NULL;
	for (v = d + 1, e = find_chars_or_comment(v, NULL); isspace((unsigned char)*v); v++)
		;
	while (e > v && isspace((unsigned char)e[-1]))
		e--;
	n = (size_t)(e - v);
	if (n + 1 > l->cap) {
		char *p = realloc(l->val, n + 1);

		*why = "out of memory";
		if (p == NULL)
			return NULL;
		l->val = p;
		l->cap = n + 1;
	}
	memcpy(l->val, v, n);
	l->val[n] = '\0';
	l->line = lineno;
	memcpy(buf, line, k);
	memcpy(buf + k, " " MARK "\n", sizeof(" " MARK "\n"));
	return buf;
}

const char *
lg_iniline_value(const struct lg_iniline *l, int lineno, const char *value, char **joined)
{
	size_t n = strlen(value), m = sizeof(MARK) - 1;

	*joined = NULL;
	if (l->line != lineno || n < m || strcmp(value + n - m, MARK) != 0)
		return value;
	if (n == m)
		return l->val;
	if ((*joined = malloc(n - m + strlen(l->val) + 1)) == NULL)
		return NULL;
	memcpy(*joined, value, n - m);
	strcpy(*joined + n - m, l->val);
	return *joined;
}

void
lg_iniline_free(struct lg_iniline *l)
{
	free(l->val);
	memset(l, 0, sizeof(*l));
}
