/* lagless: configuration, sizing, then the master. */
#include <stdio.h>
#include <stdlib.h>

#include "common/log.h"
#include "common/version.h"
#include "master/master.h"
#include "master/options.h"
#include "master/sizing.h"

int
main(int argc, char **argv)
{
	struct lg_config cfg;
	struct lg_command cmd;
	struct lg_sizing sz;
	char json[4096], err[512];

	lg_log_set_role("master", 0);
	if (lg_options_load(argc, argv, &cfg, &cmd, err, sizeof(err)) == -1) {
		fprintf(stderr, "lagless: %s\n%s", err, cmd.test_config ? "configuration test failed\n" :
		    "try 'lagless --help'\n");
		return cmd.test_config ? 1 : 2;
	}
	if (cmd.help) {
		lg_options_usage(stdout);
		return 0;
	}
	if (cmd.print_example) {
		lg_options_example(stdout);
		return 0;
	}
	if (cmd.version) {
		printf("lagless %s\n", LG_VERSION);
		return 0;
	}
	lg_log_level = cfg.log_level;
	if (!cmd.print_sizing && !cmd.test_config && lg_log_open(cfg.error_log) == -1) {
		fprintf(stderr, "lagless: cannot open the error log %s: %m\n", cfg.error_log);
		return 1;
	}
	lg_sizing_read(getenv("LAGLESS_SYSROOT"), &sz);
	lg_sizing_decide(&sz, &cfg);
	if (lg_sizing_json(&sz, json, sizeof(json)) == -1)
		snprintf(json, sizeof(json), "{}");
	if (cmd.print_sizing || cmd.test_config) {
		printf("%s\n", json);
		if (cmd.test_config)
			fprintf(stderr, "lagless: configuration %s is valid\n",
			    cmd.config_path ? cmd.config_path : "(flags and environment only)");
		return 0;
	}
	log_info("lagless %s sizing: %s", LG_VERSION, json);
	return lg_master_run(&cfg, &sz, argc, argv);
}
