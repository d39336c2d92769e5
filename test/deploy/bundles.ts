/**
 * How each bundle of the image is started to show that it loads and gets as far as its own checks,
 * shared by image.test.ts (the bundles on this machine's Node) and image-run.test.ts (in the
 * built image under containerd).
 */
export interface BundleRun {
  /** The file under /app/dist/. */
  readonly bundle: string;
  readonly args: readonly string[];
  /** What its output must show: its help, or its own message about the missing configuration. */
  readonly expect: RegExp;
}

export const BUNDLE_RUNS: readonly BundleRun[] = [
  { bundle: 'controller.js', args: ['--help'], expect: /controller/i },
  { bundle: 'certs.js', args: ['--help'], expect: /usage: certs/ },
  // No config and no pod: each must get as far as its own option check.
  { bundle: 'webhook.js', args: [], expect: /sidecar\.image|webhook options/ },
  { bundle: 'sidecar.js', args: [], expect: /POD_NAME|sidecar options/ },
  { bundle: 'node-agent.js', args: [], expect: /NODE_NAME|node agent options/ },
];

/** Exit codes a bundle may end with here: 0 after --help, 2 for a usage or configuration error. */
export const STARTED_EXIT_CODES: readonly number[] = [0, 2];
