/*
 * health-listen: opens the sidecar's health port (a listening TCP socket) and then execs the rest
 * of its command line (node ... /app/dist/sidecar.js) with that socket as fd 3, named in the
 * environment as MULTUS_PROXY_HEALTH_FD=3; src/health.ts serves on it instead of binding again.
 *
 * Why: the kubelet's startup probe is refused (an Unhealthy Event) whenever it comes before the
 * program listens, and Node.js takes 0.3 s to 2.3 s on a busy node to get there (the sidecar's CPU
 * request is 10m). This process listens within a millisecond of the container's start; from then on
 * the kernel completes every probe's TCP handshake and holds its HTTP request in the backlog until
 * Node.js accepts it, well inside the probe's timeout
 * (docs/decisions/0037-probes-and-health-port.md).
 *
 *   HEALTH_PORT  the port (the sidecar's own variable, which the webhook always sets); 9180 if unset
 *   HEALTH_HOST  the address, as the sidecar reads it; unset or "::" is every IPv6 and IPv4 address,
 *                and 0.0.0.0 when the kernel has no IPv6 (booted with ipv6.disable=1)
 *
 * When the socket cannot be made (a bad value, the port taken), it says why on stderr and execs
 * the command without it: the sidecar then binds the port itself, as it does without this launcher,
 * and reports its own error. No library beyond libc; built static (scripts/build-native.sh,
 * Dockerfile) so it runs in any image.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define HEALTH_FD 3
#define FD_ENV "MULTUS_PROXY_HEALTH_FD"
#define DEFAULT_PORT "9180"
/* The kernel caps it at net.core.somaxconn (4096); probes and scrapes are a handful at a time. */
#define BACKLOG 511

static const char *prog = "health-listen";

/* A listening socket on host:port, or -1 with the reason in *why. Numeric addresses only
 * (inet_pton, not getaddrinfo: a static binary cannot load glibc's NSS modules). */
static int listen_on(const char *host, const char *port, const char **why) {
	char *end;
	long p = strtol(port, &end, 10);
	if (*port == '\0' || *end != '\0' || p < 0 || p > 65535) { *why = "HEALTH_PORT is not a port number (0-65535)"; return -1; }
	int dual = host == NULL || *host == '\0' || strcmp(host, "::") == 0;
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)p), .sin6_addr = IN6ADDR_ANY_INIT };
	struct sockaddr_in a4 = { .sin_family = AF_INET, .sin_port = htons((uint16_t)p), .sin_addr.s_addr = htonl(INADDR_ANY) };
	int family;
	if (dual) family = AF_INET6;
	else if (inet_pton(AF_INET, host, &a4.sin_addr) == 1) family = AF_INET;
	else if (inet_pton(AF_INET6, host, &a6.sin6_addr) == 1) family = AF_INET6;
	else { *why = "HEALTH_HOST is not a numeric IPv4 or IPv6 address"; return -1; }
	int fd = socket(family, SOCK_STREAM, 0);
	if (fd < 0 && dual && (errno == EAFNOSUPPORT || errno == EPROTONOSUPPORT)) {
		/* No IPv6 in this kernel: every IPv4 address, as src/health.ts listenDualStack does. */
		family = AF_INET;
		fd = socket(family, SOCK_STREAM, 0);
	}
	if (fd < 0) { *why = strerror(errno); return -1; }
	int one = 1, zero = 0;
	/* As Node.js sets it on its own listeners: a restarted container rebinds past TIME_WAIT. */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	/* "::" takes IPv4 too, whatever net.ipv6.bindv6only says. */
	if (family == AF_INET6 && dual) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
	int bound = family == AF_INET6 ? bind(fd, (struct sockaddr *)&a6, sizeof a6) : bind(fd, (struct sockaddr *)&a4, sizeof a4);
	if (bound < 0 || listen(fd, BACKLOG) < 0) {
		*why = strerror(errno);
		close(fd);
		return -1;
	}
	return fd;
}

int main(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: %s COMMAND [ARG...]   (listens on HEALTH_HOST:HEALTH_PORT, then execs COMMAND with the socket as fd %d)\n", prog, HEALTH_FD);
		return 2;
	}
	const char *port = getenv("HEALTH_PORT");
	const char *why = NULL;
	int fd = listen_on(getenv("HEALTH_HOST"), port != NULL ? port : DEFAULT_PORT, &why);
	if (fd >= 0 && fd != HEALTH_FD) {
		/* dup2 clears close-on-exec on the copy; the socket must survive the exec. */
		if (dup2(fd, HEALTH_FD) < 0) { why = strerror(errno); close(fd); fd = -1; }
		else { close(fd); fd = HEALTH_FD; }
	}
	if (fd >= 0) setenv(FD_ENV, "3", 1);
	else {
		fprintf(stderr, "%s: not listening on HEALTH_HOST=%s HEALTH_PORT=%s (%s); %s binds it itself\n", prog,
		        getenv("HEALTH_HOST") ? getenv("HEALTH_HOST") : "(unset)", port ? port : "(unset)", why, argv[1]);
		unsetenv(FD_ENV);
	}
	execvp(argv[1], argv + 1);
	fprintf(stderr, "%s: cannot run %s: %s\n", prog, argv[1], strerror(errno));
	return 127;
}
