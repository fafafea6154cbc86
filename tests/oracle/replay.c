/* build/tests/http_oracle: the differential oracle (http_oracle.h) over files of request bytes,
 * with the server's default limits and every header field kept.
 *   usage: http_oracle FILE...     (run by tests/integration/test_http_oracle.py)
 * Prints one line per input that the two readers read differently, then how many messages
 * were compared; exits 1 if there was a difference, 2 on a file that cannot be read, else 0. */
#include <stdio.h>
#include <stdlib.h>

#include "http/http.h"
#include "tests/oracle/http_oracle.h"

int
main(int argc, char **argv)
{
	static const struct lg_http_limits lim = {
		.max_head = LG_HTTP_MAX_HEAD, .max_target = LG_HTTP_MAX_TARGET,
		.max_fields = LG_HTTP_MAX_FIELDS,
	};
	static unsigned char data[1 << 20];
	int bad = 0;

	for (int i = 1; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		char why[1024];

		if (f == NULL) {
			perror(argv[i]);
			return 2;
		}
		size_t n = fread(data, 1, sizeof(data), f);
		fclose(f);
		if (lg_oracle_check(data, n, &lim, why, sizeof(why)) != 0) {
			printf("%s: %s\n", argv[i], why);
			bad = 1;
		}
	}
	printf("compared %lu messages of %d inputs\n", lg_oracle_compared, argc - 1);
	return bad;
}
