/**
 * A pure per-key rate limiter (time passed in), for Events: the controller's on Services and the
 * webhook's NodeAgentMissing, so a Service re-applied in a loop does not write an Event each time.
 */
/** Lets a key through at most once per interval; forgets old keys so memory stays bounded. */
export class RateLimiter {
  private readonly last = new Map<string, number>();

  constructor(
    private readonly intervalMs: number,
    private readonly maxKeys = 10_000,
  ) {}

  allow(key: string, now: number): boolean {
    const t = this.last.get(key);
    if (t !== undefined && now - t < this.intervalMs) return false;
    if (this.last.size >= this.maxKeys) this.prune(now);
    this.last.set(key, now);
    return true;
  }

  private prune(now: number): void {
    for (const [k, t] of this.last) if (now - t >= this.intervalMs) this.last.delete(k);
    // Still full of fresh keys: drop the oldest half rather than grow without bound.
    if (this.last.size >= this.maxKeys) {
      const keys = [...this.last.keys()].slice(0, Math.ceil(this.maxKeys / 2));
      for (const k of keys) this.last.delete(k);
    }
  }
}
