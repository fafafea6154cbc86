/* Edit distance of short strings, for "did you mean" hints. */
#ifndef LG_COMMON_STRDIST_H
#define LG_COMMON_STRDIST_H

#include <stddef.h>

/* The Levenshtein distance (insertions, deletions, substitutions) of a and b, considering at
 * most their first 63 bytes each. No allocation. */
size_t lg_str_distance(const char *a, const char *b);

#endif
