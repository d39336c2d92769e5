/*
 * nfnl-counters: prints the named counters of one nftables table of the current network namespace,
 * one line each, "<name> <packets> <bytes>", asked of the kernel as one netlink dump of the table's
 * counter objects (NFT_MSG_GETOBJ, NLM_F_DUMP, filtered by table and type).
 *
 *   nfnl-counters <family: inet|ip|ip6> <table>
 *
 * Why not `nft list counters table ...`: nft 1.0 fetches the whole table first, every set with its
 * elements, so reading a few counters cost the sidecar as much memory as its largest set (62 MiB at
 * 144,000 policy set elements, measured). This reads only the counters: its memory does not grow
 * with the table (cmd/sidecar/policy-drops.ts, docs/decisions/0299-policy-drops-read-over-netlink.md).
 *
 *   exit 0  every counter printed (none: the table has none, or does not exist)
 *   exit 1  stderr says why (bad arguments, socket, the kernel's error)
 *
 * No library beyond libc and the kernel's headers; built static beside nfnl-batch
 * (scripts/build-native.sh, Dockerfile).
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Names as nft allows them (NFT_OBJ_MAXNAMELEN), printed only when they are one word. */
#define MAX_NAME 256

static int fail(const char *what, int err) {
	fprintf(stderr, "nfnl-counters: %s: %s\n", what, strerror(err));
	return 1;
}

static void put_attr(unsigned char *buf, size_t *off, uint16_t type, const void *data, uint16_t len) {
	struct nlattr *a = (struct nlattr *)(buf + *off);
	a->nla_type = type;
	a->nla_len = (uint16_t)(NLA_HDRLEN + len);
	memcpy(buf + *off + NLA_HDRLEN, data, len);
	memset(buf + *off + NLA_HDRLEN + len, 0, NLA_ALIGN(len) - len);
	*off += NLA_HDRLEN + NLA_ALIGN(len);
}

/* The attribute `type` among attrs[0..len), or NULL. */
static const struct nlattr *find_attr(const unsigned char *attrs, size_t len, uint16_t type) {
	size_t off = 0;
	while (off + NLA_HDRLEN <= len) {
		const struct nlattr *a = (const struct nlattr *)(attrs + off);
		if (a->nla_len < NLA_HDRLEN || off + a->nla_len > len) return NULL;
		if ((a->nla_type & NLA_TYPE_MASK) == type) return a;
		off += NLA_ALIGN(a->nla_len);
	}
	return NULL;
}

static int u64_attr(const unsigned char *attrs, size_t len, uint16_t type, uint64_t *out) {
	const struct nlattr *a = find_attr(attrs, len, type);
	if (a == NULL || a->nla_len != NLA_HDRLEN + 8) return 0;
	uint64_t be;
	memcpy(&be, (const unsigned char *)a + NLA_HDRLEN, 8);
	*out = be64toh(be);
	return 1;
}

/* A NUL-terminated one-word string attribute, or NULL. */
static const char *word_attr(const unsigned char *attrs, size_t len, uint16_t type) {
	const struct nlattr *a = find_attr(attrs, len, type);
	if (a == NULL || a->nla_len <= NLA_HDRLEN || a->nla_len - NLA_HDRLEN > MAX_NAME) return NULL;
	const char *s = (const char *)a + NLA_HDRLEN;
	size_t n = strnlen(s, a->nla_len - NLA_HDRLEN);
	if (n == 0 || n == (size_t)(a->nla_len - NLA_HDRLEN)) return NULL;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 127) return NULL;
	return s;
}

/* One NEWOBJ answer: printed when it is a counter of `table`. */
static void print_counter(const struct nlmsghdr *h, const char *table) {
	const unsigned char *attrs = (const unsigned char *)NLMSG_DATA(h) + NLMSG_ALIGN(sizeof(struct nfgenmsg));
	if (h->nlmsg_len < NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct nfgenmsg))) return;
	size_t len = h->nlmsg_len - NLMSG_HDRLEN - NLMSG_ALIGN(sizeof(struct nfgenmsg));
	const char *t = word_attr(attrs, len, NFTA_OBJ_TABLE);
	const char *name = word_attr(attrs, len, NFTA_OBJ_NAME);
	const struct nlattr *type = find_attr(attrs, len, NFTA_OBJ_TYPE);
	const struct nlattr *data = find_attr(attrs, len, NFTA_OBJ_DATA);
	if (t == NULL || name == NULL || type == NULL || data == NULL || strcmp(t, table) != 0 || type->nla_len != NLA_HDRLEN + 4) return;
	uint32_t be_type;
	memcpy(&be_type, (const unsigned char *)type + NLA_HDRLEN, 4);
	if (be32toh(be_type) != NFT_OBJECT_COUNTER) return;
	uint64_t packets, bytes;
	const unsigned char *inner = (const unsigned char *)data + NLA_HDRLEN;
	size_t inner_len = data->nla_len - NLA_HDRLEN;
	if (!u64_attr(inner, inner_len, NFTA_COUNTER_PACKETS, &packets) || !u64_attr(inner, inner_len, NFTA_COUNTER_BYTES, &bytes)) return;
	printf("%s %llu %llu\n", name, (unsigned long long)packets, (unsigned long long)bytes);
}

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: nfnl-counters <inet|ip|ip6> <table>\n");
		return 1;
	}
	uint8_t family = strcmp(argv[1], "inet") == 0 ? NFPROTO_INET : strcmp(argv[1], "ip") == 0 ? NFPROTO_IPV4 : strcmp(argv[1], "ip6") == 0 ? NFPROTO_IPV6 : 0;
	const char *table = argv[2];
	size_t table_len = strlen(table);
	if (family == 0 || table_len == 0 || table_len >= MAX_NAME) {
		fprintf(stderr, "nfnl-counters: bad family or table: %s %s\n", argv[1], table);
		return 1;
	}
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
	if (fd < 0) return fail("socket", errno);
	struct sockaddr_nl local = {.nl_family = AF_NETLINK};
	if (bind(fd, (struct sockaddr *)&local, sizeof(local)) < 0) return fail("bind", errno);

	unsigned char req[NLMSG_HDRLEN + 64 + MAX_NAME] __attribute__((aligned(4)));
	memset(req, 0, sizeof(req));
	struct nlmsghdr *h = (struct nlmsghdr *)req;
	h->nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETOBJ;
	h->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	h->nlmsg_seq = 1;
	struct nfgenmsg *g = NLMSG_DATA(h);
	g->nfgen_family = family;
	g->version = NFNETLINK_V0;
	size_t off = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(*g));
	put_attr(req, &off, NFTA_OBJ_TABLE, table, (uint16_t)(table_len + 1));
	uint32_t be_counter = htobe32(NFT_OBJECT_COUNTER);
	put_attr(req, &off, NFTA_OBJ_TYPE, &be_counter, 4);
	h->nlmsg_len = (uint32_t)off;
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	if (sendto(fd, req, off, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) return fail("send", errno);

	static unsigned char buf[65536] __attribute__((aligned(4)));
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR) continue;
		if (n < 0) return fail("recv", errno);
		if (n == 0) return fail("recv", EPIPE);
		size_t left = (size_t)n;
		for (struct nlmsghdr *m = (struct nlmsghdr *)buf; NLMSG_OK(m, left); m = NLMSG_NEXT(m, left)) {
			if (m->nlmsg_seq != 1) continue;
			if (m->nlmsg_type == NLMSG_DONE) return fflush(stdout) == 0 ? 0 : fail("stdout", errno);
			if (m->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(m);
				if (e->error == 0) continue;
				/* No such table: no counters. */
				if (e->error == -ENOENT) return 0;
				return fail("dump", -e->error);
			}
			if (m->nlmsg_type == ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWOBJ)) print_counter(m, table);
		}
	}
}
