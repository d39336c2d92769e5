/**
 * The sidecar's dataplane options, by mode. Running, it keeps spare restore processes, writes
 * endpoint changes through the element writer, and starts its first sync's reads and warms its
 * render up while its informers list (read-ahead.ts, nftables/tuning/warm-up.ts; both with nftables only).
 * `--cleanup` removes everything and exits: one operation, so no spares, no writer, nothing read
 * ahead and no warm-up. Pure.
 */
import type { DataplaneOptions } from '../../src/dataplane/index.js';
import type { Logger } from '../../src/log.js';
import type { ParsedOptions } from './options.js';

export function sidecarDataplaneOptions(opts: Pick<ParsedOptions, 'cleanup' | 'iptablesBackend' | 'elementWriter'>, backendKind: DataplaneOptions['backendKind'], logger?: Logger): DataplaneOptions {
  const common: DataplaneOptions = { backendKind, iptablesFlavor: opts.iptablesBackend, logger };
  if (opts.cleanup) return { ...common, elementWriter: false };
  return { ...common, spareRestore: true, elementWriter: opts.elementWriter, readAhead: true, warmUp: true };
}
