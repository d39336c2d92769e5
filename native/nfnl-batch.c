/*
 * nfnl-batch: sends ONE complete nfnetlink batch (BATCH_BEGIN .. messages .. BATCH_END, already
 * encoded by src/dataplane/nft/netlink-batch.ts) read from stdin on a NETLINK_NETFILTER socket of
 * the current network namespace, and checks the kernel's answer to every message that asked for
 * an ACK (NLM_F_ACK).
 *
 *   exit 0  every such message was acknowledged without error (the batch is committed); "ok" is
 *           printed on stdout first, because the exit itself can take 10 ms more: closing an
 *           nftables netlink socket waits for the kernel to free what the transaction removed (an
 *           RCU grace period), and the caller need not wait for that
 *   exit 1  stderr says which message failed, one line each: "message seq N: <strerror>"
 *           (plus the kernel's extended ACK text in parentheses when it gives one), or why the
 *           batch could not be read or sent
 *   empty stdin: exit 0 without sending anything (how a spare process started ahead is let go)
 *
 * With `--serve` it goes on: after "ok" it reads the next batch on the same socket, until EOF
 * (exit 0) or the first failure (exit 1, as above). The caller writes one batch at a time and the
 * next only after the "ok" (element-writer.ts), so a change costs two wake-ups and no process
 * start: a process started per change cost the sidecar ~2.3 ms of its main thread's CPU (the
 * spawn) and a SIGCHLD wake-up besides (bench/change-small.ts, docs/decisions/0024-nft-endpoint-maps.md).
 *
 * The batch ends at its NFNL_MSG_BATCH_END: the sender stops reading there, without waiting for
 * the end of its input, so a write wakes it once (the data), not twice (data, then EOF) when it
 * runs between the two. The socket is opened and bound before the input is read, so what runs
 * after the wake-up is the send and the answers. With `--times` it prints, after "ok", one line on
 * stderr: CLOCK_MONOTONIC nanoseconds when the first input arrived, the batch was complete, the
 * send returned and the last answer was read (bench/element-write.ts).
 *
 * No library beyond libc and the kernel's headers: the process is started ahead and waits on
 * stdin (element-writer.ts), and built static (scripts/setup.sh, Dockerfile) so it runs in any
 * image. The kernel handles a batch inside sendmsg(), so every answer is queued when it returns;
 * the receive buffer is sized for all of them (they are capped: no copy of the request).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

/* How long to wait for answers still missing after the non-blocking drain (should never happen). */
#define ANSWER_TIMEOUT_MS 5000
/* Room per queued answer in the receive buffer (an ACK's skb truesize is under 1 KiB). */
#define ANSWER_ROOM 1024

static int fail(const char *what, int err) {
	fprintf(stderr, "%s: %s\n", what, strerror(err));
	return 1;
}

/* Whether buf[0..n) holds whole messages up to and including an NFNL_MSG_BATCH_END. */
static int batch_complete(const unsigned char *buf, size_t n) {
	size_t off = 0;
	while (n - off >= sizeof(struct nlmsghdr)) {
		const struct nlmsghdr *h = (const struct nlmsghdr *)(buf + off);
		if (h->nlmsg_len < sizeof(*h) || h->nlmsg_len > n - off) return 0;
		if (h->nlmsg_type == NFNL_MSG_BATCH_END) return 1;
		off += NLMSG_ALIGN(h->nlmsg_len);
		if (off > n) return 0;
	}
	return 0;
}

static uint64_t now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The batch from stdin: up to its BATCH_END, or what came before EOF. `first` gets when input first arrived. */
static unsigned char *read_batch(size_t *len, uint64_t *first) {
	size_t cap = 65536, n = 0;
	unsigned char *buf = malloc(cap);
	if (buf == NULL) return NULL;
	for (;;) {
		if (n == cap) {
			unsigned char *next = realloc(buf, cap * 2);
			if (next == NULL) { free(buf); return NULL; }
			buf = next;
			cap *= 2;
		}
		ssize_t r = read(STDIN_FILENO, buf + n, cap - n);
		if (r < 0 && errno == EINTR) continue;
		if (r < 0) { free(buf); return NULL; }
		if (r == 0) break;
		if (n == 0) *first = now_ns();
		n += (size_t)r;
		if (batch_complete(buf, n)) break;
	}
	*len = n;
	return buf;
}

/* The kernel's extended ACK message, if the answer carries one (NLMSGERR_ATTR_MSG). */
static const char *extack_msg(const struct nlmsghdr *nlh) {
	if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS)) return NULL;
	const struct nlmsgerr *e = NLMSG_DATA(nlh);
	size_t off = sizeof(*e);
	if (!(nlh->nlmsg_flags & NLM_F_CAPPED)) off += e->msg.nlmsg_len - sizeof(struct nlmsghdr);
	size_t end = nlh->nlmsg_len - NLMSG_HDRLEN;
	while (off + NLA_HDRLEN <= end) {
		const struct nlattr *a = (const struct nlattr *)((const char *)e + off);
		if (a->nla_len < NLA_HDRLEN || off + a->nla_len > end) break;
		if ((a->nla_type & NLA_TYPE_MASK) == NLMSGERR_ATTR_MSG && a->nla_len > NLA_HDRLEN) {
			const char *s = (const char *)a + NLA_HDRLEN;
			if (memchr(s, '\0', a->nla_len - NLA_HDRLEN) != NULL) return s;
		}
		off += NLA_ALIGN(a->nla_len);
	}
	return NULL;
}

struct answers {
	const uint32_t *want;
	unsigned char *got;
	size_t count, acked, next;
	int failed;
};

/* One datagram of answers: errors are printed, ACKs ticked off (they come in batch order). */
static void take(struct answers *a, unsigned char *buf, ssize_t r) {
	for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)r); h = NLMSG_NEXT(h, r)) {
		if (h->nlmsg_type != NLMSG_ERROR) continue;
		const struct nlmsgerr *e = NLMSG_DATA(h);
		if (e->error != 0) {
			const char *msg = extack_msg(h);
			fprintf(stderr, "message seq %u: %s%s%s%s\n", e->msg.nlmsg_seq, strerror(-e->error), msg ? " (" : "", msg ? msg : "", msg ? ")" : "");
			a->failed = 1;
			continue;
		}
		for (size_t i = 0; i < a->count; i++) {
			size_t j = (a->next + i) % a->count;
			if (!a->got[j] && a->want[j] == e->msg.nlmsg_seq) {
				a->got[j] = 1;
				a->acked++;
				a->next = j + 1;
				break;
			}
		}
	}
}

/* One batch from stdin through `fd`: 0 when every ACK came ("ok" printed), 1 on failure (stderr
 * says why), 2 at EOF before any byte (nothing sent). */
static int one_batch(int fd, int times) {
	size_t len = 0;
	uint64_t t_first = 0;
	unsigned char *batch = read_batch(&len, &t_first);
	if (batch == NULL) return fail("reading the batch from stdin", errno ? errno : ENOMEM);
	if (len == 0) { free(batch); return 2; }
	uint64_t t_read = now_ns();

	/* Walk the batch: whole messages only; note the sequence numbers that ask for an ACK. */
	size_t count = 0, off = 0;
	while (off < len) {
		const struct nlmsghdr *h = (const struct nlmsghdr *)(batch + off);
		if (len - off < sizeof(*h) || h->nlmsg_len < sizeof(*h) || h->nlmsg_len > len - off) {
			fprintf(stderr, "the batch is malformed: a message at byte %zu of %zu has length %u\n", off, len,
			        len - off < sizeof(*h) ? 0 : h->nlmsg_len);
			return 1;
		}
		if (h->nlmsg_flags & NLM_F_ACK) count++;
		off += NLMSG_ALIGN(h->nlmsg_len);
	}
	const struct nlmsghdr *first = (const struct nlmsghdr *)batch;
	if (first->nlmsg_type != NFNL_MSG_BATCH_BEGIN) {
		fprintf(stderr, "the batch is malformed: it starts with message type %u, not NFNL_MSG_BATCH_BEGIN\n", first->nlmsg_type);
		return 1;
	}
	uint32_t *want = calloc(count ? count : 1, sizeof(*want));
	unsigned char *got = calloc(count ? count : 1, 1);
	if (want == NULL || got == NULL) return fail("allocating", ENOMEM);
	size_t k = 0;
	for (off = 0; off < len; off += NLMSG_ALIGN(((const struct nlmsghdr *)(batch + off))->nlmsg_len)) {
		const struct nlmsghdr *h = (const struct nlmsghdr *)(batch + off);
		if (h->nlmsg_flags & NLM_F_ACK) want[k++] = h->nlmsg_seq;
	}

	/* One datagram must fit the send buffer; every answer the receive buffer. Forced (CAP_NET_ADMIN,
	 * which writing nftables needs anyway) or else as large as the limits allow. */
	int snd = (int)(len + 65536), rcv = (int)(count * ANSWER_ROOM + 65536);
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &snd, sizeof(snd)) < 0) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, sizeof(snd));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcv, sizeof(rcv)) < 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));

	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	ssize_t sent;
	do sent = sendto(fd, batch, len, 0, (struct sockaddr *)&kernel, sizeof(kernel));
	while (sent < 0 && errno == EINTR);
	if (sent < 0) {
		fprintf(stderr, "sending the batch (%zu bytes, seq %u..): %s\n", len, first->nlmsg_seq, strerror(errno));
		return 1;
	}
	uint64_t t_sent = now_ns();

	static unsigned char buf[1 << 16];
	struct answers a = {.want = want, .got = got, .count = count};
	while (a.acked < count && !a.failed) {
		ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (r < 0 && errno == EINTR) continue;
		if (r < 0 && errno == EAGAIN) {
			struct pollfd p = {.fd = fd, .events = POLLIN};
			int n = poll(&p, 1, ANSWER_TIMEOUT_MS);
			if (n < 0 && errno == EINTR) continue;
			if (n <= 0) break;
			continue;
		}
		if (r < 0 && errno == ENOBUFS) {
			fprintf(stderr, "answers lost (receive buffer overrun, %zu of %zu read): the batch's outcome is unknown\n", a.acked, count);
			return 1;
		}
		if (r < 0) return fail("receiving the answers", errno);
		take(&a, buf, r);
	}
	/* Drain what is already queued, so every failure is printed (and a batch without ACKs asked
	 * still reports the errors the kernel always sends). */
	for (ssize_t r; (r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0;) take(&a, buf, r);
	if (a.failed) return 1;
	if (a.acked < count) {
		for (size_t i = 0; i < count; i++)
			if (!got[i]) {
				fprintf(stderr, "message seq %u: no acknowledgement within %d ms\n", want[i], ANSWER_TIMEOUT_MS);
				break;
			}
		return 1;
	}
	uint64_t t_answered = now_ns();
	fputs("ok\n", stdout);
	fflush(stdout);
	if (times) fprintf(stderr, "times %llu %llu %llu %llu\n", (unsigned long long)t_first, (unsigned long long)t_read, (unsigned long long)t_sent, (unsigned long long)t_answered);
	free(batch);
	free(want);
	free(got);
	return 0;
}

int main(int argc, char **argv) {
	int times = 0, serve = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--times") == 0) times = 1;
		else if (strcmp(argv[i], "--serve") == 0) serve = 1;
	}
	/* Ready before the input comes: after the wake-up only the send and the answers remain. */
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
	if (fd < 0) return fail("socket(AF_NETLINK, NETLINK_NETFILTER)", errno);
	int one = 1;
	/* Answers without a copy of the request (an error's would repeat a whole element list). */
	setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
	setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
	struct sockaddr_nl local = {.nl_family = AF_NETLINK};
	if (bind(fd, (struct sockaddr *)&local, sizeof(local)) < 0) return fail("bind(AF_NETLINK)", errno);

	/* --serve: batch after batch on the same socket until EOF; the first failure ends the process
	 * (exit 1, stderr complete at exit, as for a single batch). */
	for (;;) {
		int r = one_batch(fd, times);
		if (r == 2) return 0;
		if (r != 0 || !serve) return r;
	}
}
