/**
 * The sidecar as the project's image runs it, for B5: the image's Node.js binary and /app/dist
 * bundle (built by scripts/setup.sh → scripts/build-images.sh into buildah's private storage),
 * copied out once into a cache folder keyed by the image id, and the command and environment the
 * webhook injects (cmd/webhook/mutate.ts sidecarContainer with the shipped deploy/base configuration). The binary is
 * run on the host, in the bench pod's network namespace: it is linked against Debian bookworm's
 * libraries, which match the host (checked with ldd before use).
 */
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { load } from 'js-yaml';
import { parseOptions } from '../../cmd/webhook/options.js';
import { launchedByHealthListen, sidecarContainer } from '../../cmd/webhook/mutate.js';
import { OPTION_SOURCES } from '../../src/sidecar-contract.js';
import { run } from './proc.js';
import { ROOT } from './report.js';
import type { SidecarCommand } from './sidecar-env.js';

const SETUP_HINT = 'run `bash scripts/setup.sh` (it builds the image with buildah)';
/** Where the image keeps node (the official node image's path, test/images/node) and the bundles. */
const IMAGE_NODE = '/usr/local/bin/node';
const IMAGE_APP = '/app/dist';

/** `buildah images --format '{{.Name}}:{{.Tag}} {{.ID}}'` output → image id by name (untagged `<none>` lines dropped). */
export function parseImageList(text: string): Map<string, string> {
  const ids = new Map<string, string>();
  for (const line of text.split('\n')) {
    const [name, id] = line.trim().split(/\s+/);
    if (!name || !id || name.startsWith('<none>')) continue;
    ids.set(name, id.replace(/^sha256:/, ''));
  }
  return ids;
}

/** Libraries `ldd` could not resolve (`libfoo.so => not found`); empty when the binary can run here. */
export function missingLibraries(lddOutput: string): string[] {
  return [...lddOutput.matchAll(/^\s*(\S+)\s+=>\s+not found/gm)].map((m) => m[1] ?? '');
}

/**
 * The injected container's command and literal environment mapped onto the copy at `root`:
 * `node` → the image's binary, `/app/dist/…` → the copied bundle. Downward-API variables (pod
 * name, namespace) and those B5 sets for every runtime alike (health port and host, log level)
 * are left to the caller; paths inside the container (the xtables lock, the annotations file)
 * are dropped: the host's iptables-nft takes no lock, and without the file the sidecar watches
 * its pod through the API, as B5's Node 20 run does.
 */
export function injectedOnHost(
  container: { command?: string[]; env?: { name: string; value?: string }[] },
  imageEnv: readonly string[],
  root: string,
): { binary: string; argv: string[]; env: Record<string, string> } {
  // health-listen only opens the health port before exec'ing node; B5 measures node's memory.
  const command = container.command ?? [];
  const [node, ...args] = launchedByHealthListen(command) ? command.slice(1) : command;
  if (node !== 'node') throw new Error(`the injected command starts with ${String(node)}, not node (nor health-listen node)`);
  const argv = args.map((a) => (a.startsWith(`${IMAGE_APP}/`) ? path.join(root, 'dist', a.slice(IMAGE_APP.length + 1)) : a));
  const skip = new Set(['PATH', 'XTABLES_LOCKFILE', OPTION_SOURCES.annotationsFile.env, OPTION_SOURCES.podLabelsFile.env, OPTION_SOURCES.healthPort.env, 'LOG_LEVEL']);
  const env: Record<string, string> = {};
  for (const kv of imageEnv) {
    const i = kv.indexOf('=');
    if (i > 0 && !skip.has(kv.slice(0, i))) env[kv.slice(0, i)] = kv.slice(i + 1);
  }
  for (const e of container.env ?? []) if (e.value !== undefined && !skip.has(e.name)) env[e.name] = e.value;
  return { binary: path.join(root, 'node'), argv, env };
}

/** The webhook's injected sidecar container as shipped: deploy/base/webhook-config.yaml's config.yaml, parsed by the webhook's own options. */
function injectedContainer(image: string): ReturnType<typeof sidecarContainer> {
  const configMap = load(readFileSync(path.join(ROOT, 'deploy', 'base', 'webhook-config.yaml'), 'utf8')) as { data?: Record<string, string> };
  const file = '/etc/multus-proxy/config.yaml';
  const parsed = parseOptions({ WEBHOOK_CONFIG: file, SIDECAR_IMAGE: image }, [], (p) => (p === file ? configMap.data?.['config.yaml'] : undefined));
  if (!parsed.ok) throw new Error(`B5: deploy/base/webhook-config.yaml: ${parsed.error}`);
  return sidecarContainer(parsed.value.sidecar, 'token', true);
}

function cacheDir(): string {
  const bin = process.env.MULTUS_PROXY_BIN_DIR ?? path.join(os.homedir(), '.cache', 'multus-proxy', 'bin');
  return path.dirname(path.resolve(bin));
}

/**
 * The image's sidecar as a B5 command. Fails (never skips) without buildah, without the image,
 * or when the copied binary cannot run on this host.
 */
export async function imageSidecarCommand(): Promise<SidecarCommand & { imageId: string; nodeVersion: string }> {
  const version = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  const image = `docker.io/library/multus-proxy:${version}`;
  const cache = cacheDir();
  const b = ['--root', path.join(cache, 'buildah', 'root'), '--runroot', path.join(cache, 'buildah', 'runroot'), '--storage-driver', 'overlay'];
  const listed = await run('buildah', [...b, 'images', '--noheading', '--no-trunc', '--format', '{{.Name}}:{{.Tag}} {{.ID}}'], { check: false }).catch((e: unknown) => ({
    code: -1,
    stdout: '',
    stderr: String(e),
  }));
  if (listed.code !== 0) throw new Error(`B5: cannot list buildah's images (${listed.stderr.trim().slice(0, 200)}): ${SETUP_HINT}`);
  const id = parseImageList(listed.stdout).get(image);
  if (!id) throw new Error(`B5: no image ${image} in ${path.join(cache, 'buildah')}: ${SETUP_HINT}`);
  const root = path.join(cache, 'image-runtime', id.slice(0, 12));
  if (!existsSync(path.join(root, 'node'))) await copyOut(b, image, root);
  const ldd = await run('ldd', [path.join(root, 'node')], { check: false });
  const missing = missingLibraries(ldd.stdout);
  if (ldd.code !== 0 || missing.length > 0) throw new Error(`B5: the image's node cannot run on this host (missing ${missing.join(', ') || ldd.stderr.trim()})`);
  const nodeVersion = (await run(path.join(root, 'node'), ['--version'])).stdout.trim();
  const imageEnv = JSON.parse(readFileSync(path.join(root, 'env.json'), 'utf8')) as string[];
  const { binary, argv, env } = injectedOnHost(injectedContainer(image), imageEnv, root);
  const envText = Object.entries(env)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
  return {
    binary,
    argv,
    env,
    imageId: id.slice(0, 12),
    nodeVersion,
    how: `the image's runtime: ${image} (id ${id.slice(0, 12)}), its node ${nodeVersion} and /app/dist/sidecar.js copied out, run as injected: node ${argv.slice(0, -1).join(' ')} with ${envText}`,
  };
}

/** Copies the image's node binary, bundles and environment to `root` (via a temp folder, so a half copy is never used). */
async function copyOut(b: readonly string[], image: string, root: string): Promise<void> {
  const tmp = `${root}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  const ctr = (await run('buildah', [...b, 'from', '--pull=never', image])).stdout.trim().split('\n').pop() ?? '';
  try {
    const mnt = (await run('buildah', [...b, 'mount', ctr])).stdout.trim();
    await run('cp', ['-a', path.join(mnt, IMAGE_NODE), path.join(tmp, 'node')]);
    await run('cp', ['-a', path.join(mnt, IMAGE_APP), path.join(tmp, 'dist')]);
    const inspect = JSON.parse((await run('buildah', [...b, 'inspect', '--type', 'image', image])).stdout) as { OCIv1?: { config?: { Env?: string[] } } };
    writeFileSync(path.join(tmp, 'env.json'), JSON.stringify(inspect.OCIv1?.config?.Env ?? []));
  } finally {
    await run('buildah', [...b, 'rm', ctr], { check: false });
  }
  rmSync(root, { recursive: true, force: true });
  renameSync(tmp, root);
}
