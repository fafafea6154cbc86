/* The run as a picture, drawn by gnuplot (Debian gnuplot-nox): every request's latency over the
 * run's time axis per route (log scale, 503s marked), and against lagless the loop lag and the
 * queue depth, in-flight requests and busy compute processes beneath on the same axis. PNG
 * (pngcairo) or SVG, chosen by the file name's ending. Every text is drawn as it is written
 * (the terminals are set noenhanced): in gnuplot's enhanced mode a route named /a_b would show
 * b as a subscript, and '@', '&', '^', '~', '{' would be markup. */
#ifndef LL_LOAD_PLOT_H
#define LL_LOAD_PLOT_H

#include "load/report.h"

/* Writes the plot of report r to path (ending .png or .svg). The data and script go to a
 * temporary directory under $TMPDIR (or /tmp), removed afterwards. Returns 0, or -1 with errno
 * EINVAL (another ending), ENOENT (gnuplot not installed), EIO (gnuplot failed; its messages
 * are on stderr), or what creating the files failed with. */
int ll_plot_write(const struct ll_report *r, const char *path);

/* Runs gnuplot on script and waits for it. Returns 0, or -1 with errno ENOENT (gnuplot not
 * installed), EIO (it failed; its messages are on stderr) or the posix_spawnp(3) error. */
int ll_plot_gnuplot(const char *script);

#endif
