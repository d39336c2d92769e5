/**
 * The sidecar's own pod annotations and labels from the downwardAPI volume the webhook injects
 * (`metadata.annotations`, `metadata.labels`: one `key="value"` per line), in place of a watch on
 * the pod: so the sidecar's ServiceAccount needs no right to read pods, and neither does every app
 * container that mounts the same token.
 *
 * The kubelet refreshes the volume when the pod changes, by writing a new timestamped directory
 * and swapping the `..data` symlink (its atomic writer), so a watch on the directory sees each
 * refresh. fs.watch can miss events (overlay file systems, a watch set up before the directory
 * existed), so the file is also re-read every `pollMs`; only a changed text is passed on.
 */
import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Logger } from '../../src/log.js';
import { parseDownwardMap } from '../../src/annotations/downward-api.js';

/** Re-read this often even when no change was seen. */
export const ANNOTATIONS_POLL_MS = 10_000;
/** Events of one symlink swap come in a burst: read once after it. */
const SETTLE_MS = 50;

export interface PodInfoFileOptions {
  readonly file: string;
  /** What the file holds, for log lines: `annotations` or `labels`. */
  readonly what: string;
  readonly log: Logger;
  readonly onChange: (annotations: Record<string, string>) => void;
  readonly pollMs?: number;
}

export type AnnotationsFileOptions = Omit<PodInfoFileOptions, 'what'>;

export interface PodInfoFile {
  start(): void;
  /** Resolves after the first read, whether or not the file was there. */
  readonly synced: Promise<void>;
  /** Whether the file has been read at least once. */
  found(): boolean;
  stop(): void;
}

/** What the watcher knows between reads. */
interface FileState {
  /** The last text read that parsed. */
  last: string | undefined;
  missingLogged: boolean;
  stopped: boolean;
}

/** One read: the annotations to onChange when the text changed and every line parsed. */
async function readOnce(o: PodInfoFileOptions, st: FileState): Promise<void> {
  let text: string;
  try {
    text = await readFile(o.file, 'utf8');
  } catch (e) {
    if (!st.missingLogged) o.log.warn({ file: o.file, err: e instanceof Error ? e.message : String(e) }, `pod ${o.what} file not readable; retrying (is the downwardAPI volume mounted?)`);
    st.missingLogged = true;
    return;
  }
  st.missingLogged = false;
  if (st.stopped || text === st.last) return;
  const parsed = parseDownwardMap(text);
  if (parsed.problems.length > 0) {
    // The kubelet writes this file; a line we cannot read is kept out rather than half-used.
    o.log.error({ file: o.file, problems: parsed.problems }, `pod ${o.what} file has lines that do not parse; keeping the last good ${o.what}`);
    return;
  }
  st.last = text;
  o.onChange(parsed.values);
}

/** The pod's annotations file (metadata.annotations). */
export const watchAnnotationsFile = (o: AnnotationsFileOptions): PodInfoFile => watchPodInfoFile({ ...o, what: 'annotations' });

export function watchPodInfoFile(o: PodInfoFileOptions): PodInfoFile {
  const st: FileState = { last: undefined, missingLogged: false, stopped: false };
  let watcher: FSWatcher | undefined;
  let poll: NodeJS.Timeout | undefined;
  let settle: NodeJS.Timeout | undefined;
  let reading: Promise<void> | undefined;
  let again = false;
  let markSynced: () => void = () => {};
  const synced = new Promise<void>((resolve) => (markSynced = resolve));

  /** One read at a time; a request during a read runs once after it. */
  function read(): Promise<void> {
    if (reading !== undefined) {
      again = true;
      return reading;
    }
    reading = (async () => {
      do {
        again = false;
        await readOnce(o, st);
      } while (again && !st.stopped);
      reading = undefined;
    })();
    return reading;
  }

  function startWatch(): void {
    if (watcher !== undefined || st.stopped) return;
    try {
      watcher = watch(dirname(o.file), () => {
        if (settle !== undefined) clearTimeout(settle);
        settle = setTimeout(() => void read(), SETTLE_MS);
      });
      watcher.on('error', () => {
        watcher?.close();
        watcher = undefined;
      });
    } catch {
      watcher = undefined;
    }
  }

  return {
    start() {
      startWatch();
      void read().then(markSynced);
      poll = setInterval(() => {
        startWatch();
        void read();
      }, o.pollMs ?? ANNOTATIONS_POLL_MS);
    },
    synced,
    found: () => st.last !== undefined,
    stop() {
      st.stopped = true;
      watcher?.close();
      if (poll !== undefined) clearInterval(poll);
      if (settle !== undefined) clearTimeout(settle);
    },
  };
}
