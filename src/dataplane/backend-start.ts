/**
 * The start-up edge of the back-end choice (backend-choice.ts is the pure decision), shared by the
 * sidecar and the node agent: probe nftables in this namespace when the choice depends on it, and
 * stop the program (exit 2, the options' exit code) when a forced back end cannot work, since
 * every sync would fail after it.
 */
import type { Logger } from '../log.js';
import { chooseRuleBackend, type BackendChoice } from './backend-choice.js';
import type { BackendKind } from './core/seam.js';
import { createExec } from './tuning/spare-exec.js';
import { probeNftables } from './nftables/probe.js';

/** `probeText` is the table the program will write, in small (nftables/probe.ts's default is the sidecar's). */
export async function chooseBackendAtStart(requested: BackendKind | 'auto', log: Logger, probeText?: string): Promise<BackendChoice> {
  const exec = createExec();
  try {
    return await chooseRuleBackend(requested, () => probeNftables(exec, probeText), 'DATAPLANE_BACKEND (--backend)');
  } catch (e) {
    log.fatal({ err: e }, e instanceof Error ? e.message : String(e));
    process.exit(2);
  } finally {
    exec.close();
  }
}
