/* Lines longer than inih's buffer (master/ only). Debian's libinih is built with a 200-byte
 * stack buffer (INI_MAX_LINE, INI_USE_STACK; /usr/include/ini.h) and parses the rest of a
 * longer line as a line of its own. The reader (master/options.c read_line) hands inih a short
 * stand-in instead, "key =" and a marker, keeps the value aside, and the ini handler takes it
 * back, so every key's own checks see the value the file holds. */
#ifndef LG_MASTER_INILINE_H
#define LG_MASTER_INILINE_H

#include <stddef.h>

#define LG_INILINE_MAX 65536 /* bytes of a line, its newline excluded: a longer one is refused */

/* The value of the last long line (zeroed: none; owned by the reader's context). */
struct lg_iniline {
	char *val;   /* heap, NUL-terminated */
	size_t cap;
	int line;    /* the line val is of (0: none) */
};

/* line (NUL-terminated, its newline included; lineno: its number from 1, a UTF-8 byte order
 * mark skipped on line 1 as inih does) does not fit inih's buffer buf (size bytes). A comment
 * becomes ";"; a key = value line keeps its bytes up to its '=' (or ':') and a marker, its
 * value as inih would take it (up to an inline " ;" comment, blanks around it stripped) goes to
 * l (l->val grows on the heap). Returns buf, or NULL with *why (a printf format taking the
 * limit, size - 2) for a section header, a line that is not key = value, a key too long for
 * buf, or no memory. */
char *lg_iniline_shorten(struct lg_iniline *l, const char *line, int lineno, char *buf,
    int size, const char **why);

/* The value inih handed the handler for line lineno, as the file has it: value itself for a
 * line that was not shortened, else l->val, or (when inih took an indented line for a
 * continuation of the key before, INI_ALLOW_MULTILINE, and passed "key = " and the marker) a
 * heap string put in *joined, which the caller frees. *joined is NULL otherwise. Returns NULL
 * when out of memory. */
const char *lg_iniline_value(const struct lg_iniline *l, int lineno, const char *value,
    char **joined);

/* Frees l->val and zeroes l. */
void lg_iniline_free(struct lg_iniline *l);

#endif
