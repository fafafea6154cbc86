#include "common/strdist.h"

#include <string.h>

size_t
lg_str_distance(const char *a, const char *b)
{
	size_t la = strnlen(a, 63), lb = strnlen(b, 63), row[64];

	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0], up;

		row[0] = i;
		for (size_t j = 1; j <= lb; j++, diag = up) {
			up = row[j];
			row[j] = diag + (a[i - 1] != b[j - 1]);
			row[j] = up + 1 < row[j] ? up + 1 : row[j];
			row[j] = row[j - 1] + 1 < row[j] ? row[j - 1] + 1 : row[j];
		}
	}
	return row[lb];
}
