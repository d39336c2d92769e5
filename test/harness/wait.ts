/** Polling helpers for tests that wait on something asynchronous (an informer, a process). */
import { setTimeout as delay } from 'node:timers/promises';

/** Resolves once `check` returns true; fails after timeoutMs with `what` and the last value of `describe`. */
export async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 15_000, describe?: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${describe ? `: ${describe()}` : ''}`);
    await delay(50);
  }
}
