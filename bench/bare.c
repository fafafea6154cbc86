/* bench/bare: the bare server, the least work any HTTP/1.1 server can do per request on this
 * machine: the ceiling against which benchmark 6's ratios to nginx are read.
 *
 * It forks --workers processes that share one listening socket on 127.0.0.1:--port (0 picks
 * one; the port is printed as "port=N" on stdout), each an epoll loop (EPOLLEXCLUSIVE on the
 * listener, as nginx does since 1.11.3). Every readable connection gets one recv(2) and, for
 * every read that returned bytes, one send(2) of a canned answer: no parsing, no timers, no
 * allocation, no clock. --status 200 answers "ok"; --status 503 answers an empty 503 with
 * Retry-After and keeps the connection, as lagless and nginx do for a refusal.
 *
 * It is not an HTTP server: it assumes one whole request per read, which holds only for a
 * client with one request in flight per connection (wrk without a pipelining script,
 * bench/latency). So its CPU per request and its refusal latency are the floor for the
 * syscalls every server must make (accept4, recv, send, epoll_wait): a server's ratio to
 * nginx cannot be better than this program's, measured in the same run.
 *
 * Two switches turn it into a model of a server doing more, to see what a figure depends on:
 * --spin-ns N spends N ns of user CPU per answer (a loop on clock_gettime(2), standing in for
 * parsing and routing), and --hog forks one more process at nice 5 that spins for ever, as a
 * compute process running a job does (its CPU is charged to the same session, the same
 * autogroup, as the workers: sched(7)).
 *
 * usage: bare [--port P] [--workers N] [--status 200|503] [--spin-ns N] [--hog]
 * Runs until SIGTERM or SIGINT (the workers die with the parent: PR_SET_PDEATHSIG). Exits 2
 * on bad usage, 1 when the socket cannot be set up. */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_EVENTS 512

static const char ANSWER_200[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
				 "Content-Length: 2\r\n\r\nok";
static const char ANSWER_503[] = "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n"
				 "Content-Length: 0\r\n\r\n";

static long spin_ns;

static long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void spin(long ns)
{
	long end = now_ns() + ns;

	while (now_ns() < end)
		;
}

static void serve(int lfd, const char *answer, size_t len)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.fd = lfd};
	struct epoll_event evs[MAX_EVENTS];
	char buf[16384];

	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) != 0) {
		perror("bare: epoll");
		_exit(1);
	}
	for (;;) {
		int n = epoll_wait(ep, evs, MAX_EVENTS, -1);

		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;

			if (fd == lfd) {
				int c;
				int one = 1;

				while ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
					struct epoll_event cev = {.events = EPOLLIN, .data.fd = c};

					(void)setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
					if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev) != 0)
						close(c);
				}
				continue;
			}
			ssize_t r = recv(fd, buf, sizeof buf, 0);

			if (r > 0) {
				if (spin_ns > 0)
					spin(spin_ns);
				if (send(fd, answer, len, MSG_NOSIGNAL) < 0 && errno != EAGAIN)
					close(fd);
			} else if (r == 0 || errno != EAGAIN) {
				close(fd);  /* closing removes it from the epoll set, epoll(7) */
			}
		}
	}
}

/* A listening TCP socket on 127.0.0.1:port (0: any free port), non-blocking; prints
 * "port=N" on stdout. Returns the descriptor, or -1 after perror. */
static int
listen_loopback(int port)
{
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof sa;

	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
	    bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(lfd, 4096) != 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl) != 0) {
		perror("bare: listen");
		return -1;
	}
	printf("port=%d\n", ntohs(sa.sin_port));
	fflush(stdout);
	return lfd;
}

/* Forks `workers` processes serving lfd with the fixed answer (len bytes), and with hog one
 * more that only burns CPU at nice 5. They die with the parent (PR_SET_PDEATHSIG). Returns 0,
 * or -1 after perror when a fork failed. */
static int
start_workers(int lfd, int workers, int hog, const char *answer, size_t len)
{
	pid_t parent = getpid();

	for (int i = 0; i < workers + hog; i++) {
		pid_t pid = fork();

		if (pid == 0) {
			(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(0);
			if (i == workers) {  /* the hog: nice 5, as lagless runs compute processes */
				(void)prctl(PR_SET_NAME, "bare-hog");
				(void)setpriority(PRIO_PROCESS, 0, 5);
				for (;;)
					spin(1000000000L);
			}
			serve(lfd, answer, len);
		}
		if (pid < 0) {
			perror("bare: fork");
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"port", required_argument, NULL, 'p'},
		{"workers", required_argument, NULL, 'w'},
		{"status", required_argument, NULL, 's'},
		{"spin-ns", required_argument, NULL, 'n'},
		{"hog", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int port = 0, workers = 1, status = 200, hog = 0, c;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'p': port = atoi(optarg); break;
		case 'w': workers = atoi(optarg); break;
		case 's': status = atoi(optarg); break;
		case 'n': spin_ns = atol(optarg); break;
		case 'h': hog = 1; break;
		default: return 2;
		}
	}
	if (workers < 1 || workers > 64 || (status != 200 && status != 503) || port < 0 ||
	    port > 65535 || spin_ns < 0 || spin_ns > 1000000) {
		fprintf(stderr, "usage: bare [--port P] [--workers 1..64] [--status 200|503] "
			"[--spin-ns 0..1000000] [--hog]\n");
		return 2;
	}
	int lfd = listen_loopback(port);

	if (lfd < 0)
		return 1;
	const char *answer = status == 200 ? ANSWER_200 : ANSWER_503;
	size_t len = status == 200 ? sizeof ANSWER_200 - 1 : sizeof ANSWER_503 - 1;

	if (start_workers(lfd, workers, hog, answer, len) == -1)
		return 1;
	close(lfd);
	sigset_t set;
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	sigwait(&set, &sig);
	return 0;  /* the workers get SIGKILL through PR_SET_PDEATHSIG */
}
