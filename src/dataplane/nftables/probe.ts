/**
 * Whether this network namespace's kernel and `nft` can hold our table: `nft -c -f` (check mode:
 * the batch goes to the kernel, which loads every expression's module and checks it, then aborts
 * it, so nothing is created) of a table with one Service port of every shape the back end writes:
 * IPv4 and IPv6, TCP, UDP and SCTP, several endpoints (numgen), ClientIP affinity (dynamic sets
 * with timeouts, endpoint chains), no endpoints (the reject set), and the hooks. The text is the
 * renderer's own (render.ts), so the probe checks what the back end will write.
 */
import { summarize as firstLine, type Exec } from '../core/exec.js';
import type { ChosenEndpoint, IpFamily, Protocol } from '../core/model.js';
import { fullText, renderNft, type NftTargetInput } from './render.js';

function port(family: IpFamily, protocol: Protocol, clusterIP: string, endpoints: readonly ChosenEndpoint[], affinitySeconds?: number): NftTargetInput {
  return { target: { family, protocol, port: 80 }, clusterIP, chain: `MPX-PROBE-${family}-${protocol}-${endpoints.length}`, endpoints, affinitySeconds };
}

const V4: readonly ChosenEndpoint[] = [
  { ip: '192.0.2.1', port: 8080 },
  { ip: '192.0.2.2', port: 8080 },
];
const V6: readonly ChosenEndpoint[] = [
  { ip: '2001:db8::1', port: 8080 },
  { ip: '2001:db8::2', port: 8080 },
];

/** The probe table's text (documentation addresses; check mode creates nothing). Pure. */
export function probeText(): string {
  return fullText(
    renderNft([
      port(4, 'TCP', '198.51.100.1', V4),
      port(4, 'UDP', '198.51.100.2', V4, 10800),
      port(4, 'SCTP', '198.51.100.3', []),
      port(6, 'TCP', '2001:db8:96::1', V6, 60),
      port(6, 'UDP', '2001:db8:96::2', V6.slice(0, 1)),
      port(6, 'SCTP', '2001:db8:96::3', []),
    ]),
  );
}

/** undefined when the table can be written here; else what nft said (a missing binary says so). */
export async function probeNftables(exec: Exec, text: string = probeText()): Promise<string | undefined> {
  try {
    const r = await exec('nft', ['-c', '-f', '-'], text);
    if (r.code === 0) return undefined;
    return r.code === 127 ? 'nft is not installed' : `nft -c -f of the probe table failed (exit ${r.code}): ${firstLine(r.stderr)}`;
  } catch (e) {
    return `nft cannot be run: ${e instanceof Error ? e.message : String(e)}`;
  }
}
