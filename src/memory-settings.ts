/**
 * How the project's long-running Node.js programs are started so their private memory settles low
 * (measured in docs/benchmarks.md, B5 and B12; why in
 * docs/decisions/0030-memory-settings.md). The webhook injects them into the sidecar (cmd/webhook/options.ts); the controller's
 * and webhook's Deployments and the node agent's DaemonSet carry them in their manifests (deploy/
 * and the Helm chart), which test/deploy/render.test.ts checks against these values.
 */

/**
 * V8 flags (the sidecar's, the node agent's, the webhook's). A 1 MiB young generation: V8 otherwise
 * grows each semi-space up to 16 MiB under allocation bursts (a list, a relist after a watch breaks,
 * admissions of ~20 KB pods) and keeps the pages, which showed as
 * reserved heap rising over hours of churn while the retained heap stayed flat.
 * `--optimize-for-size`: Node 24's V8 lets the old generation fill much further with garbage
 * before a major GC; with the flag it grows the heap less eagerly and collects sooner.
 */
export const NODE_MEMORY_FLAGS: readonly string[] = ['--max-semi-space-size=1', '--optimize-for-size'];

/**
 * The controller's: `--optimize-for-size` only. Its cold start lists every pod of the cluster, and
 * with a 1 MiB young generation that took 31 s instead of 9–17 at 1,000 Services × 10 pods (B6,
 * docs/benchmarks.md, "Memory settings"): nearly everything a list allocates survives a 1 MiB
 * scavenge and is copied again into the old generation. The sidecar and node agent list Services
 * and slices only, where the cap showed no slowdown.
 */
export const CONTROLLER_NODE_FLAGS: readonly string[] = ['--optimize-for-size'];

/**
 * glibc malloc settings, in the container's environment. Blocks of 32 KiB and more (socket and pipe
 * reads of 64 KiB, V8's compiler zones) get their own mapping, returned to the kernel when freed,
 * and a free top of more than 64 KiB is trimmed at once. With glibc's defaults the sidecar's first
 * sync left them in fragmented arenas (private memory at 1,000 Services 23.5 → 20.6 MiB). The
 * sidecar's environment; its iptables and ip children inherit them, harmlessly.
 */
export const MALLOC_ENV: Readonly<Record<string, string>> = { MALLOC_MMAP_THRESHOLD_: '32768', MALLOC_TRIM_THRESHOLD_: '65536' };

/**
 * The controller's, the webhook's and the node agent's: the same, and at most two arenas. glibc otherwise makes
 * one per thread that allocates (up to 8 per core: V8's GC and compiler threads, libuv's pool), each
 * keeping freed memory of its own; under churn on Node 24 the node agent's memory outside the V8
 * heap was twice the sidecar's (B12). The sidecar showed no difference with it (B5, B12).
 */
export const DEPLOYMENT_MALLOC_ENV: Readonly<Record<string, string>> = { ...MALLOC_ENV, MALLOC_ARENA_MAX: '2' };
