/**
 * The serving certificate, from tls.crt/tls.key files (a mounted Secret), reloaded without a
 * restart when they change. Kubernetes updates a Secret volume by writing a new timestamped
 * folder and swapping the `..data` symlink the files point through, so the folder is watched
 * (a watch on the file itself would stay on the old inode) and, because file events can be
 * missed (some overlay and network file systems send none), the files are also re-read on a
 * timer. A pair is only taken when the key matches the certificate: a writer that replaces the
 * two files one after the other is seen at most half-done, and then the old pair stays in use.
 */
import { watch, readFileSync, type FSWatcher } from 'node:fs';
import { dirname } from 'node:path';
import { keyMatchesCert, inspectCert } from '../../src/cert-info.js';
import type { Logger } from '../../src/log.js';
import { err, ok, type Result } from '../../src/result.js';

export interface ServingCertificate {
  readonly cert: Buffer;
  readonly key: Buffer;
  readonly notAfter: Date;
  readonly fingerprint256: string;
}

export interface CertificateSource {
  current(): ServingCertificate;
  /** Called after a new, valid pair was loaded. */
  onChange(listener: (c: ServingCertificate) => void): void;
  /** Re-reads the files now; true when a different valid pair was loaded. */
  reload(): boolean;
  close(): void;
}

export interface WatchOptions {
  readonly pollMs?: number;
  readonly logger?: Logger;
  /** Each load attempt's result, for metrics. */
  readonly onLoad?: (result: 'loaded' | 'failed', c?: ServingCertificate) => void;
}

/** Reads and checks one pair; the message says which file is wrong and how. */
export function loadCertificatePair(certFile: string, keyFile: string): Result<ServingCertificate, string> {
  let cert: Buffer;
  let key: Buffer;
  try {
    cert = readFileSync(certFile);
    key = readFileSync(keyFile);
  } catch (e) {
    return err(
      `serving certificate: cannot read ${(e as { path?: string }).path ?? `${certFile} or ${keyFile}`} (${(e as Error).message}); mount the webhook's TLS Secret there or pass --tls-cert-file/--tls-key-file`,
    );
  }
  const info = inspectCert(cert.toString('utf8'));
  if (info === undefined) return err(`serving certificate: ${certFile} is not a PEM certificate; it must hold the webhook's serving certificate (tls.crt of a kubernetes.io/tls Secret)`);
  if (!keyMatchesCert(cert.toString('utf8'), key.toString('utf8'))) {
    return err(`serving certificate: ${keyFile} is not the private key of ${certFile}; write both files from the same Secret`);
  }
  return ok({ cert, key, notAfter: info.notAfter, fingerprint256: info.fingerprint256 });
}

const DEBOUNCE_MS = 50;

/** Loads the pair (throws with the reason when it cannot: the webhook must not start without one) and keeps it current. */
export function watchCertificateFiles(certFile: string, keyFile: string, opts: WatchOptions = {}): CertificateSource {
  const first = loadCertificatePair(certFile, keyFile);
  opts.onLoad?.(first.ok ? 'loaded' : 'failed', first.ok ? first.value : undefined);
  if (!first.ok) throw new Error(first.error);
  let current = first.value;
  const listeners: ((c: ServingCertificate) => void)[] = [];
  let lastError: string | undefined;

  const reload = (): boolean => {
    const next = loadCertificatePair(certFile, keyFile);
    if (!next.ok) {
      // Logged once per distinct problem: the poll would otherwise repeat it every few seconds.
      if (next.error !== lastError) opts.logger?.warn({ err: next.error }, 'serving certificate not reloaded; keeping the current one');
      if (next.error !== lastError) opts.onLoad?.('failed');
      lastError = next.error;
      return false;
    }
    lastError = undefined;
    if (next.value.fingerprint256 === current.fingerprint256 && next.value.key.equals(current.key)) return false;
    current = next.value;
    opts.onLoad?.('loaded', current);
    opts.logger?.info({ fingerprint256: current.fingerprint256, notAfter: current.notAfter.toISOString() }, 'serving certificate reloaded');
    for (const l of listeners) l(current);
    return true;
  };

  let debounce: NodeJS.Timeout | undefined;
  const schedule = (): void => {
    if (debounce !== undefined) clearTimeout(debounce);
    debounce = setTimeout(() => {
      debounce = undefined;
      reload();
    }, DEBOUNCE_MS);
  };
  const watchers: FSWatcher[] = [];
  for (const dir of new Set([dirname(certFile), dirname(keyFile)])) {
    try {
      const w = watch(dir, { persistent: false }, schedule);
      w.on('error', (e) => opts.logger?.warn({ err: e, dir }, 'certificate folder watch failed; relying on the periodic re-read'));
      watchers.push(w);
    } catch (e) {
      opts.logger?.warn({ err: e, dir }, 'cannot watch the certificate folder; relying on the periodic re-read');
    }
  }
  const poll = setInterval(reload, opts.pollMs ?? 10_000);
  poll.unref();

  return {
    current: () => current,
    onChange: (l) => void listeners.push(l),
    reload,
    close() {
      clearInterval(poll);
      if (debounce !== undefined) clearTimeout(debounce);
      for (const w of watchers) w.close();
    },
  };
}
