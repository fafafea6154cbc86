/* systemd integration of the master (libsystemd): readiness and state notifications
 * (sd_notify(3), the NOTIFY_SOCKET protocol) and the watchdog interval (sd_watchdog_enabled(3)).
 * Only the master notifies; without NOTIFY_SOCKET every call is a no-op that returns 0. */
#ifndef LG_MASTER_NOTIFY_H
#define LG_MASTER_NOTIFY_H

#include <stddef.h>
#include <stdint.h>

/* Sends READY=1 with a STATUS= line (status may be NULL). Returns > 0 when sent, 0 when not
 * under systemd, or -1 with errno from the socket. */
int lg_notify_ready(const char *status);

/* Sends RELOADING=1 with MONOTONIC_USEC= (CLOCK_MONOTONIC, us), as systemd.service(5) requires
 * for Type=notify-reload style reloads; READY=1 follows when the reload is done. */
int lg_notify_reloading(void);

/* Sends STOPPING=1. */
int lg_notify_stopping(void);

/* Sends a STATUS= line (shown by systemctl status). */
int lg_notify_status(const char *status);

/* Sends WATCHDOG=1. The caller sends it only while every loop worker is healthy. */
int lg_notify_watchdog(void);

/* The watchdog interval in us systemd expects pings within (WATCHDOG_USEC for this pid), or 0
 * when the watchdog is off. */
uint64_t lg_notify_watchdog_usec(void);

/* Socket activation (sd_listen_fds(3)): every passed descriptor (SD_LISTEN_FDS_START.., in the
 * order of the .socket unit's Listen lines) into fds (cap of them), each checked to be a
 * listening stream socket and made non-blocking and close-on-exec; LISTEN_PID/LISTEN_FDS/
 * LISTEN_FDNAMES are cleared so children do not inherit them. Returns how many (0 when none was
 * passed), or -1 with the reason in err (errlen bytes): more than cap were passed, or one is not
 * a listening stream socket (all are served or the start is refused, never a part: a socket
 * nobody accepts on would hold its connections in the backlog). The descriptors stay open. */
int lg_notify_listen_fds(int *fds, int cap, char *err, size_t errlen);

#endif
