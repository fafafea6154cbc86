/* `lagless -s reload`: the command side of a reload that tells the truth (nginx's -s reload,
 * which however returns before the outcome is known). */
#ifndef LG_MASTER_CTL_H
#define LG_MASTER_CTL_H

#include "common/cfg_master.h"

/* Sends SIGHUP to the master named by mc->pid_file (the master's settings) and waits, polling PATH.reload every
 * 20 ms for at most drain_timeout_ms + 30 s (a reload deferred behind draining generations
 * waits for one drain), for the outcome of that signal. The caller has already loaded and
 * checked the configuration the master will read. Prints one line on stderr and returns the
 * exit status: 0 when the new generation accepts, 1 when the master refused the configuration
 * (its reason printed), exited, or did not answer in time, 2 when there is no pid file or no
 * such process. */
int lg_ctl_reload(const struct lg_master_cfg *mc);

#endif
