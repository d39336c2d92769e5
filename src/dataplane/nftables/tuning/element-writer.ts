/**
 * Writes interval-map contents (netlink-batch.ts) to the kernel through nfnl-batch
 * (native/nfnl-batch.c), which sends one encoded batch and checks every ACK. IO only.
 *
 * As `nft -f -` (iptables.ts), the sender runs where the dataplane runs (here, or under `ip netns
 * exec` in tests) and one process is started ahead, waiting on its input, so a write costs no
 * process start, and a write is done at the sender's "ok". Unlike nft, it stays (`--serve`): it
 * answers batch after batch, so a change costs no spawn afterwards either, until its first
 * failure ends it. nfnl-batch does nothing before a batch is complete, so a process started long
 * ago behaves as a new one; EOF (close(), or this process exiting) lets it go without touching
 * the kernel.
 *
 * The factory probes once: a flush of a map in a table that does not exist must come back as
 * that message's ENOENT (binary runs, socket opens in this namespace with the right to write
 * nftables, the kernel answers per message). Otherwise it logs why, once, and returns undefined,
 * and the caller keeps writing elements as nft text.
 */
import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import { inNetns, summarize } from '../../core/exec.js';
import { launch, setRef, SpareProcess, type Launched, type LaunchResult } from '../../tuning/spare-process.js';
import { describeMessage, encodeIntervalMapBatch, type ElementWrite, type IntervalMapWrite } from '../netlink-batch.js';

export interface ElementWriter {
  write(writes: readonly ElementWrite[]): Promise<void>;
}

/** The writer as the factory hands it out: close() lets its spare process go. */
export interface ElementWriterHandle extends ElementWriter {
  close(): void;
}

/** Where the image puts nfnl-batch (Dockerfile); development builds it into $BIN_DIR (scripts/build-native.sh). */
export const DEFAULT_NFNL_BATCH = '/usr/local/bin/nfnl-batch';

export interface ElementWriterOptions {
  /** The nfnl-batch binary (default DEFAULT_NFNL_BATCH). */
  readonly binary?: string;
  /** Test hook, as DataplaneOptions.netns: run under `ip netns exec <netns>`. */
  readonly netns?: string;
  /** Gets the one line saying why the writer is not used. */
  readonly logger?: { warn(message: string): void };
}

/** A write that failed: the kernel refused it (then nothing of the batch was applied), or the sender did. */
export class ElementWriteError extends Error {
  constructor(
    message: string,
    readonly stderr: string,
  ) {
    super(message);
    this.name = 'ElementWriteError';
  }
}

/** nfnl-batch names a failed message as `message seq N: <strerror>`. */
const FAILED = /^message seq (\d+): (.*)$/gm;

/** The error for a failed run, each failed message named by what it did. Pure. */
export function writeFailure(writes: readonly ElementWrite[], messages: Parameters<typeof describeMessage>[1], r: { code: number; stderr: string }): ElementWriteError {
  const named = [...r.stderr.matchAll(FAILED)].map((m) => `${describeMessage(writes, messages, Number(m[1]))}: ${m[2] ?? ''}`);
  // The kernel refused a message: the transaction was aborted whole. Otherwise (not sent, answers
  // lost) the stderr line says what is known.
  if (named.length > 0) return new ElementWriteError(`nfnl-batch failed, nothing of the batch applied: ${named.join('; ')}`, r.stderr);
  return new ElementWriteError(`nfnl-batch failed (exit ${r.code}): ${summarize(r.stderr)}`, r.stderr);
}

/**
 * One batch into a launched nfnl-batch. Success is the "ok" line: a one-batch process's exit can lag
 * ~10 ms behind it (nfnl-batch.c), and a serving one stays. A failure waits for the exit (a serving
 * one exits at its first failure too), so stderr is complete. `serve`: the batch is written without EOF.
 */
async function runBatch(bytes: Uint8Array, l: Launched, serve: boolean): Promise<LaunchResult> {
  setRef(l, true);
  let onData: ((b: Buffer) => void) | undefined;
  const ok = new Promise<LaunchResult>((resolve) => {
    let out = '';
    onData = (b: Buffer) => {
      out += b.toString();
      if (out === 'ok\n') resolve({ code: 0, stdout: out, stderr: '' });
    };
    l.child.stdout?.on('data', onData);
  });
  if (serve) l.child.stdin?.write(bytes);
  else l.child.stdin?.end(bytes);
  try {
    const r = await Promise.race([ok, l.result]);
    // A serving process that exits 0 without "ok" ('data' comes before 'close') got EOF first:
    // the batch was never answered (the probe, a one-batch run, reports its own exit code).
    return serve && r.code === 0 && r.stdout !== 'ok\n' ? { ...r, code: 1, stderr: `${r.stderr}exited without answering the batch` } : r;
  } finally {
    if (onData !== undefined) l.child.stdout?.off('data', onData);
  }
}

/** A table no one has: the probe's flush must fail with ENOENT on its own message. */
const PROBE_TABLE = 'multus_proxy_element_writer_probe';

export async function createElementWriter(opts: ElementWriterOptions = {}): Promise<ElementWriterHandle | undefined> {
  const binary = opts.binary ?? DEFAULT_NFNL_BATCH;
  const argv = inNetns(opts.netns, [binary]);
  const off = (why: string): undefined => {
    opts.logger?.warn(`nftables element writer off (endpoint changes go through nft -f instead): ${why}`);
    return undefined;
  };
  try {
    await access(binary, constants.X_OK);
  } catch (e) {
    return off(`${binary} is not an executable file (${e instanceof Error ? e.message : String(e)})`);
  }
  // Sequence numbers only need to tell this process's messages apart; wrap at 2^32.
  let seq = 1;
  const batch = (writes: readonly ElementWrite[]): ReturnType<typeof encodeIntervalMapBatch> => {
    const b = encodeIntervalMapBatch(writes, seq);
    seq = (seq + b.messages.length) % 0x100000000;
    return b;
  };

  const probeWrites: IntervalMapWrite[] = [{ table: PROBE_TABLE, map: 'absent', family: 4, ranges: [] }];
  const probe = batch(probeWrites);
  const flushSeq = probe.messages.find((m) => m.kind === 'flush')?.seq;
  const p = await runBatch(probe.bytes, launch(argv), false);
  const expected = `message seq ${String(flushSeq)}: No such file or directory`;
  // Exactly that answer: exit 0 would mean the batch never reached the kernel's checks (or a stand-in binary).
  if (p.code !== 1 || p.stderr.trim() !== expected) {
    return off(`${argv.join(' ')}: its probe (a flush in a missing table) gave exit ${p.code}${p.stderr.trim() === '' ? '' : `: ${summarize(p.stderr)}`}, not "${expected}"`);
  }

  // One process serves batch after batch (nfnl-batch --serve): a change costs two wake-ups and no
  // spawn (~2.3 ms of this process's main thread per change, docs/decisions/0024-nft-endpoint-maps.md). It exits at its
  // first failure, and the next write starts a new one.
  const spare = new SpareProcess(inNetns(opts.netns, [binary, '--serve']), (r) => r.code === 0);
  spare.start();
  // One batch at a time, in call order: the kernel applies each as one transaction anyway.
  let queue: Promise<unknown> = Promise.resolve();
  const writeNow = async (writes: readonly ElementWrite[]): Promise<void> => {
    if (writes.length === 0) return;
    // Encoding throws on bad input before any process is touched.
    const b = batch(writes);
    // A run killed from outside is run again (the batch replaces the maps' contents whole), and
    // the next spare starts after the caller has seen the write done.
    const r = await spare.run((l) => runBatch(b.bytes, l, true));
    if (r.code !== 0) throw writeFailure(writes, b.messages, r);
  };
  return {
    write(writes) {
      const next = queue.then(() => writeNow(writes));
      queue = next.catch(() => undefined);
      return next;
    },
    close() {
      spare.close();
    },
  };
}
