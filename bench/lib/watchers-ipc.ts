/** What B7 (bench/b7-apiserver-load.ts) and its watcher processes (bench/servers/watchers.ts) share. */

/** The slice whose changes the watchers report. */
export const PROBE_SLICE = 'b7-probe';

/** What a watcher process reports every 250 ms (cumulative since it started). */
export interface WatcherCounts {
  lists: number;
  watches: number;
  /** List and watch requests that failed (the informer then backs off). */
  failed: number;
  /** TLS connections opened, completed (handshake done), and closed before the handshake completed. */
  tlsOpened: number;
  tlsDone: number;
  tlsFailed: number;
}

export const ZERO_COUNTS: WatcherCounts = { lists: 0, watches: 0, failed: 0, tlsOpened: 0, tlsDone: 0, tlsFailed: 0 };
