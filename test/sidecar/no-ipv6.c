/*
 * no-ipv6 COMMAND [ARG...]: runs COMMAND where socket(AF_INET6, ...) fails with EAFNOSUPPORT, as on
 * a kernel booted with ipv6.disable=1 (a seccomp filter, inherited across exec), for
 * health-listen.test.ts. x86_64 only; it checks that the filter works before it execs.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
	if (argc < 2) { fprintf(stderr, "usage: no-ipv6 COMMAND [ARG...]\n"); return 2; }
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET6, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EAFNOSUPPORT & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof f / sizeof f[0], .filter = f };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
		fprintf(stderr, "no-ipv6: seccomp: %s\n", strerror(errno));
		return 4;
	}
	if (socket(AF_INET6, SOCK_STREAM, 0) >= 0 || errno != EAFNOSUPPORT) { fprintf(stderr, "no-ipv6: the filter does not refuse AF_INET6 here\n"); return 4; }
	execvp(argv[1], argv + 1);
	fprintf(stderr, "no-ipv6: cannot run %s: %s\n", argv[1], strerror(errno));
	return 127;
}
