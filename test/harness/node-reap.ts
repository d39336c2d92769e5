/**
 * The detached reaper's last step: `node --import tsx node-reap.ts <node dir>` tears the node down
 * when the process that started it died without stop() (killed outright, or a crash). See
 * test/harness/node.ts.
 */
import { loadState, teardown } from './node-host.js';

const dir = process.argv[2];
if (dir) {
  const state = loadState(dir);
  if (state) {
    const left = teardown(state, (m) => console.error(`node-reap: ${m}`));
    process.exitCode = left.length > 0 ? 1 : 0;
  }
}
