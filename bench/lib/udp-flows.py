"""New UDP flows from one socket, one per destination port, each sendto timed (bench/policy.ts).

usage: udp-flows.py DST FIRST_PORT COUNT [REFUSED_DST]

Each datagram starts a new conntrack flow, so the sending namespace's output hook runs the whole
policy chain for every one. Prints one JSON line: the per-sendto times in microseconds (median,
p90, p99, mean) and the errors. With REFUSED_DST, first checks that a datagram to it is refused by
the policy (EPERM: the drop), so a run can only pass through a policy that enforces.
"""
import errno
import json
import socket
import sys
import time


def main() -> None:
    dst, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    refused = sys.argv[4] if len(sys.argv) > 4 else None
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    payload = b"x"
    refused_ok = None
    if refused is not None:
        try:
            s.sendto(payload, (refused, first))
            refused_ok = False
        except OSError as e:
            refused_ok = e.errno == errno.EPERM
    times = []
    errors = 0
    clock = time.perf_counter_ns
    send = s.sendto
    for port in range(first, first + count):
        addr = (dst, port)
        t0 = clock()
        try:
            send(payload, addr)
        except OSError:
            errors += 1
        times.append(clock() - t0)
    times.sort()
    n = len(times)
    q = lambda f: times[min(n - 1, int(f * n))] / 1000.0
    print(json.dumps({"n": n, "errors": errors, "refused": refused_ok, "median": q(0.5), "p90": q(0.9), "p99": q(0.99), "mean": sum(times) / n / 1000.0}))


main()
