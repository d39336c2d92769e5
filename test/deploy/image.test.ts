/**
 * The Dockerfile, checked structurally: these tests parse it and replay its build stage without a
 * container engine (fast, and they name the line at fault). The image itself is built by
 * scripts/build-images.sh (buildah) and run under containerd by image-run.test.ts.
 *
 * - Structure: the stages and base images, the packages of the runtime stage, a numeric non-root
 *   user equal to the manifests' runAsUser.
 * - Every COPY source of the build context exists and is not excluded by .dockerignore.
 * - The build stage's `npm run build` is replayed in a folder holding only what its COPY lines
 *   bring in (node_modules linked in for `npm ci`): a file it forgot to copy breaks that build.
 * - The native stage compiles every native/*.c with scripts/build-native.sh's flags; replayed
 *   here, each gives a static executable, which the runtime copies where its user looks (the
 *   element writer; the injected sidecar's command).
 * - Every bundle that something runs (the image's CMD, each Deployment, Job and CronJob command,
 *   the webhook's injected sidecar command) is among the build's outputs, and each bundle starts
 *   from a folder without node_modules, as in the runtime stage, which copies only dist/.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, posix } from 'node:path';
import { promisify } from 'node:util';
import { DEFAULT_SIDECAR_COMMAND, HEALTH_LISTEN } from '../../cmd/webhook/options.js';
import { DEFAULT_NFNL_BATCH } from '../../src/dataplane/nftables/tuning/element-writer.js';
import { countersReaderBeside } from '../../cmd/sidecar/policy-drops.js';
import { KUSTOMIZATIONS, REPO, at, podSpec, render } from './kustomize.js';
import { BUNDLE_RUNS, STARTED_EXIT_CODES } from './bundles.js';

interface Instruction {
  readonly op: string;
  readonly args: string;
  readonly line: number;
}

interface Stage {
  readonly from: string;
  readonly name: string | undefined;
  readonly instructions: Instruction[];
}

/** Dockerfile -> stages of instructions; continuation lines joined, comments dropped. */
function parseDockerfile(text: string): Stage[] {
  const stages: Stage[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const start = i;
    let line = lines[i] ?? '';
    if (/^\s*(#|$)/.test(line)) continue;
    while (/\\\s*$/.test(line) && i + 1 < lines.length) {
      i++;
      const next = lines[i] ?? '';
      // Comment lines inside a continued RUN are dropped by Docker too.
      if (/^\s*#/.test(next)) {
        line = line.replace(/\\\s*$/, '\\');
        continue;
      }
      line = `${line.replace(/\\\s*$/, '')} ${next.trim()}`;
    }
    const m = /^\s*([A-Za-z]+)\s+(.*)$/.exec(line);
    if (m === null) throw new Error(`Dockerfile line ${start + 1}: cannot read ${JSON.stringify(line)}`);
    const op = (m[1] ?? '').toUpperCase();
    const args = (m[2] ?? '').trim();
    if (op === 'FROM') {
      const f = /^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args);
      if (f === null) throw new Error(`Dockerfile line ${start + 1}: FROM ${args}`);
      stages.push({ from: f[1] ?? '', name: f[2], instructions: [] });
    } else {
      const stage = stages[stages.length - 1];
      if (stage === undefined) throw new Error(`Dockerfile line ${start + 1}: ${op} before FROM`);
      stage.instructions.push({ op, args, line: start + 1 });
    }
  }
  return stages;
}

interface Copy {
  readonly from: string | undefined;
  readonly sources: string[];
  readonly dest: string;
  readonly line: number;
}

function copies(stage: Stage): Copy[] {
  return stage.instructions
    .filter((i) => i.op === 'COPY')
    .map((i) => {
      const words = i.args.startsWith('[') ? (JSON.parse(i.args) as string[]) : i.args.split(/\s+/);
      const flags = words.filter((w) => w.startsWith('--'));
      const paths = words.filter((w) => !w.startsWith('--'));
      const from = flags.find((f) => f.startsWith('--from='))?.slice('--from='.length);
      return { from, sources: paths.slice(0, -1), dest: paths[paths.length - 1] ?? '', line: i.line };
    });
}

/** .dockerignore patterns (the subset this repository uses: names, folders, `*` globs). */
function ignored(patterns: readonly string[], path: string): boolean {
  const clean = path.replace(/^\.\//, '').replace(/\/$/, '');
  let out = false;
  for (const p of patterns) {
    const negate = p.startsWith('!');
    const pat = (negate ? p.slice(1) : p).replace(/^\//, '').replace(/\/$/, '');
    const body = pat
      .split('**')
      .map((part) => part.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*'))
      .join('.*');
    const re = new RegExp(`^${body}(/.*)?$`);
    if (re.test(clean)) out = !negate;
  }
  return out;
}

function workdir(stage: Stage, upTo: number): string {
  let wd = '/';
  for (const i of stage.instructions) {
    if (i.line > upTo) break;
    if (i.op === 'WORKDIR') wd = posix.resolve(wd, i.args);
  }
  return wd;
}

function listFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile())
    .map((d) => join(d.parentPath, d.name));
}

const dockerfile = readFileSync(join(REPO, 'Dockerfile'), 'utf8');
const stages = parseDockerfile(dockerfile);
const dockerignore = existsSync(join(REPO, '.dockerignore'))
  ? readFileSync(join(REPO, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'))
  : [];
const build = stages[0];
const native = stages.find((s) => s.name === 'native');
const runtime = stages[stages.length - 1];

void describe('Dockerfile structure', () => {
  void test('parses into a build stage, a native stage and a runtime stage on Debian bookworm', () => {
    assert.equal(stages.length, 3, stages.map((s) => s.from).join(', '));
    assert.ok(build && native && runtime);
    assert.equal(native.from, 'node:24-bookworm-slim', 'the base scripts/build-images.sh provides');
    // Node.js 24 LTS in the image (Node 20 is end of life); development still runs on Node >= 20.
    assert.equal(build.from, 'node:24-bookworm-slim');
    assert.ok(['node:24-bookworm-slim', 'debian:bookworm-slim'].includes(runtime.from), runtime.from);
    const buildRuns = build.instructions.filter((i) => i.op === 'RUN').map((i) => i.args);
    assert.ok(buildRuns.some((r) => /\bnpm ci\b/.test(r)), 'npm ci');
    assert.ok(buildRuns.some((r) => /\bnpm run build\b/.test(r)), 'npm run build');
  });

  void test('npm ci takes npm config and CA only from optional build secrets, so a plain docker build works unchanged', () => {
    const npmCi = build?.instructions.find((i) => i.op === 'RUN' && /\bnpm ci\b/.test(i.args));
    assert.ok(npmCi, 'RUN npm ci');
    const mounts = [...npmCi.args.matchAll(/--mount=(\S+)/g)].map((m) => new Map((m[1] ?? '').split(',').map((kv) => [kv.split('=')[0] ?? '', kv.split('=')[1] ?? ''])));
    const byId = new Map(mounts.map((m) => [m.get('id'), m]));
    assert.equal(byId.get('npmrc')?.get('type'), 'secret', `npmrc secret mount on line ${npmCi.line}`);
    assert.equal(byId.get('npmrc')?.get('target'), '/root/.npmrc', 'npm reads the root user\'s config');
    assert.equal(byId.get('npm_ca')?.get('type'), 'secret', 'npm_ca secret mount');
    // scripts/build-images.sh writes `cafile=<this path>` into the npmrc secret.
    const script = readFileSync(join(REPO, 'scripts', 'build-images.sh'), 'utf8');
    assert.ok(script.includes(`cafile=${byId.get('npm_ca')?.get('target') ?? '?'}`), 'build-images.sh points cafile at the npm_ca mount');
    for (const m of mounts) assert.equal(m.get('required'), 'false', `secret ${m.get('id')} must be optional`);
    // Nothing else of npm's configuration reaches the image: no ARG/ENV for it.
    for (const i of stages.flatMap((s) => s.instructions)) {
      if (i.op === 'ARG' || i.op === 'ENV') assert.doesNotMatch(i.args, /npm|NODE_EXTRA_CA|cafile/i, `line ${i.line}: ${i.op} ${i.args}`);
    }
  });

  void test('the runtime has both iptables back ends, ip6tables, nft, iproute2 and conntrack, and no build tools', () => {
    const runs = (runtime?.instructions ?? []).filter((i) => i.op === 'RUN').map((i) => i.args).join(' ');
    const install = /apt-get install\s+([^&;]*)/.exec(runs)?.[1]?.split(/\s+/).filter((w) => w !== '' && !w.startsWith('-')) ?? [];
    // Debian's iptables package holds iptables-nft, iptables-legacy and the ip6tables variants.
    for (const pkg of ['iptables', 'nftables', 'iproute2', 'conntrack']) assert.ok(install.includes(pkg), `apt-get install ${pkg}: ${install.join(' ')}`);
    assert.match(runs, /--no-install-recommends/);
    assert.match(runs, /rm -rf \/var\/lib\/apt\/lists/);
    assert.ok(!(runtime?.instructions ?? []).some((i) => i.op === 'RUN' && /npm (ci|install)/.test(i.args)), 'no npm install at run time');
  });

  void test('every binary the sidecar runs comes from a package the runtime stage installs (Debian bookworm, as here)', async () => {
    const runs = (runtime?.instructions ?? []).filter((i) => i.op === 'RUN').map((i) => i.args).join(' ');
    const install = new Set(/apt-get install\s+([^&;]*)/.exec(runs)?.[1]?.split(/\s+/).filter((w) => w !== '' && !w.startsWith('-')) ?? []);
    // src/dataplane/iptables.ts: <iptables|ip6tables>-<nft|legacy>-<restore|save>; src/dataplane/routes.ts: ip;
    // src/dataplane/conntrack.ts: conntrack; src/dataplane/nft/backend.ts: nft.
    const binaries = ['iptables', 'ip6tables'].flatMap((t) => ['nft', 'legacy'].flatMap((b) => ['restore', 'save'].map((x) => `${t}-${b}-${x}`)));
    binaries.push('ip', 'conntrack', 'nft');
    for (const bin of binaries) {
      let pkg: string | undefined;
      for (const dir of ['/usr/sbin', '/sbin', '/usr/bin', '/bin']) {
        const r = await promisify(execFile)('dpkg', ['-S', `${dir}/${bin}`]).then(
          (x) => x.stdout,
          (e: Error & { code?: string }) => {
            if (e.code === 'ENOENT') throw new Error('dpkg not found: this check needs a Debian machine like the image\'s base');
            return '';
          },
        );
        pkg = /^([^:\s]+):/.exec(r)?.[1];
        if (pkg !== undefined) break;
      }
      assert.ok(pkg, `${bin}: no Debian package provides it on this machine (apt-get install iptables iproute2 conntrack)`);
      assert.ok(install.has(pkg), `${bin} comes from ${pkg}, which the runtime stage does not install (${[...install].join(' ')})`);
    }
  });

  void test('runs as a numeric non-root user, the one the manifests name', async () => {
    const user = runtime?.instructions.filter((i) => i.op === 'USER').pop()?.args ?? '';
    const m = /^(\d+)(?::(\d+))?$/.exec(user);
    assert.ok(m, `USER ${user} must be numeric so the kubelet can check runAsNonRoot`);
    assert.notEqual(Number(m[1]), 0);
    const objs = await render('deploy/overlays/bootstrap');
    for (const o of objs.filter((x) => podSpec(x) !== undefined)) {
      assert.equal(at(podSpec(o), 'securityContext', 'runAsUser'), Number(m[1]), `${o.kind} ${o.metadata?.name} runAsUser`);
      if (m[2] !== undefined) assert.equal(at(podSpec(o), 'securityContext', 'runAsGroup'), Number(m[2]), `${o.kind} ${o.metadata?.name} runAsGroup`);
    }
  });

  void test('iptables-legacy can restore under readOnlyRootFilesystem with the image\'s XTABLES_LOCKFILE (and cannot without it)', async () => {
    const env = new Map(
      (runtime?.instructions ?? [])
        .filter((i) => i.op === 'ENV')
        .map((i) => /^(\S+?)[= ](.*)$/.exec(i.args))
        .filter((m): m is RegExpExecArray => m !== null)
        .map((m) => [m[1] ?? '', m[2] ?? '']),
    );
    const lockfile = env.get('XTABLES_LOCKFILE');
    assert.ok(lockfile?.startsWith('/dev/shm/'), `ENV XTABLES_LOCKFILE on the writable /dev/shm, got ${lockfile}`);
    // A container as the sidecar sees it: a fresh network namespace, /run read-only (root
    // filesystem), /dev/shm a writable tmpfs. Everything happens in namespaces made here.
    const script = [
      'mount -t tmpfs -o ro tmpfs /run',
      'mount -t tmpfs tmpfs /dev/shm',
      `printf '*nat\\n:MPXIMG-TEST - [0:0]\\nCOMMIT\\n' | iptables-legacy-restore --noflush`,
    ].join(' && ');
    const run = (extra: Record<string, string>): Promise<{ code: number; out: string }> =>
      promisify(execFile)('unshare', ['--net', '--mount', 'sh', '-c', script], { env: { PATH: process.env['PATH'] ?? '', ...extra } }).then(
        (r) => ({ code: 0, out: r.stdout + r.stderr }),
        (e: Error & { code?: number | string; stderr?: string }) => {
          if (e.code === 'ENOENT') throw new Error('unshare is not installed: apt-get install util-linux (and run the tests as root)');
          return { code: typeof e.code === 'number' ? e.code : -1, out: e.stderr ?? e.message };
        },
      );
    const without = await run({});
    assert.notEqual(without.code, 0, 'without the variable the restore must fail, else this test proves nothing');
    assert.match(without.out, /xtables\.lock/, without.out);
    const withLock = await run({ XTABLES_LOCKFILE: lockfile ?? '' });
    assert.equal(withLock.code, 0, withLock.out);
  });

  void test('every COPY source exists in the build context and is not excluded by .dockerignore', () => {
    const all = stages.flatMap(copies).filter((c) => c.from === undefined);
    assert.ok(all.length >= 4);
    for (const c of all) {
      for (const src of c.sources) {
        assert.ok(existsSync(join(REPO, src)), `Dockerfile line ${c.line}: COPY ${src} does not exist`);
        assert.ok(!ignored(dockerignore, src), `Dockerfile line ${c.line}: COPY ${src} is excluded by .dockerignore`);
      }
    }
    // The pattern matcher itself, so the check above can fail.
    assert.ok(ignored(dockerignore, 'node_modules') && ignored(dockerignore, 'test/deploy/image.test.ts') && !ignored(dockerignore, 'src/keys.ts'));
  });

  void test('the runtime copies only the bundles, nfnl-batch, nfnl-counters and health-listen, from where the build and native stages write them', () => {
    const fromStages = copies(runtime ?? { from: '', name: '', instructions: [] }).filter((c) => c.from !== undefined);
    assert.deepEqual(
      fromStages.map((c) => c.from),
      [build?.name, native?.name, native?.name, native?.name],
      'one COPY --from the build stage, one per native helper',
    );
    const fromBuild = fromStages.filter((c) => c.from === build?.name);
    const [c] = fromBuild;
    assert.equal(c?.from, build?.name);
    const buildInstr = build?.instructions.find((i) => i.op === 'RUN' && /npm run build/.test(i.args));
    assert.equal(c?.sources[0]?.replace(/\/$/, ''), posix.join(workdir(build ?? { from: '', name: '', instructions: [] }, buildInstr?.line ?? 0), 'dist'));
    assert.equal(c?.dest.replace(/\/$/, ''), '/app/dist');
    const dests = new Map(fromStages.filter((x) => x.from === native?.name).map((x) => [x.sources.join(' '), x.dest]));
    const outputs = new Map(nativeCompiles().map((n) => [posix.basename(n.source, '.c'), n.output]));
    assert.equal(dests.get(outputs.get('nfnl-batch') ?? ''), DEFAULT_NFNL_BATCH, 'nfnl-batch where the element writer looks by default');
    assert.equal(dests.get(outputs.get('nfnl-counters') ?? ''), countersReaderBeside(DEFAULT_NFNL_BATCH), 'nfnl-counters where the sidecar looks for it, beside nfnl-batch');
    assert.equal(dests.get(outputs.get('health-listen') ?? ''), HEALTH_LISTEN, 'health-listen where the injected sidecar command runs it');
    assert.equal(DEFAULT_SIDECAR_COMMAND[0], HEALTH_LISTEN, 'the injected sidecar starts under health-listen');
  });
});

/** The native stage's compile lines: `gcc <flags> -o <output> <source>`, one per helper. */
function nativeCompiles(): { flags: string[]; output: string; source: string }[] {
  const runs = native?.instructions.filter((i) => i.op === 'RUN' && /^gcc\s/.test(i.args)) ?? [];
  assert.ok(runs.length > 0, 'the native stage runs gcc');
  return runs.map((run) => {
    const m = /^gcc\s+(.*?)\s+-o\s+(\S+)\s+(\S+)$/.exec(run.args);
    assert.ok(m, `line ${run.line}: expected "gcc <flags> -o <output> <source>", got ${run.args}`);
    return { flags: (m[1] ?? '').split(/\s+/), output: m[2] ?? '', source: m[3] ?? '' };
  });
}

void describe('the native stage, replayed without Docker', () => {
  void test("compiles every native/*.c with build-native.sh's flags into static executables: nfnl-batch exits 0 on empty input, health-listen execs its command", async () => {
    const compiles = nativeCompiles();
    const script = readFileSync(join(REPO, 'scripts', 'build-native.sh'), 'utf8');
    const cflags = /^CFLAGS=\((.*)\)$/m.exec(script)?.[1]?.split(/\s+/);
    const sources = readdirSync(join(REPO, 'native')).filter((f) => f.endsWith('.c')).sort();
    assert.deepEqual(compiles.map((n) => posix.basename(n.source)).sort(), sources, 'every native source is compiled');
    assert.deepEqual(/^for name in (.*); do$/m.exec(script)?.[1]?.split(' ').sort(), sources.map((f) => f.replace(/\.c$/, '')), 'scripts/build-native.sh builds the same helpers');
    const copied = copies(native ?? { from: '', name: '', instructions: [] });
    assert.deepEqual(
      copied.map((c) => [[...c.sources].sort(), c.dest]),
      [[sources.map((f) => `native/${f}`), posix.dirname(compiles[0]?.source ?? '') + '/']],
      'the sources, where gcc reads them',
    );
    const dir = mkdtempSync(join(tmpdir(), 'multus-proxy-native-'));
    try {
      for (const { flags, output, source } of compiles) {
        assert.deepEqual(flags, cflags, 'the image and scripts/build-native.sh compile alike');
        assert.ok(flags.includes('-static'), 'static: the runtime stage has no compiler and no libc headers to match');
        assert.equal(posix.dirname(source), posix.dirname(compiles[0]?.source ?? ''));
        const out = join(dir, posix.basename(output));
        await promisify(execFile)('gcc', [...flags, '-o', out, join(REPO, 'native', posix.basename(source))]).catch((e: Error & { code?: string; stderr?: string }) => {
          throw new Error(e.code === 'ENOENT' ? 'gcc not found: apt-get install gcc libc6-dev (scripts/setup.sh does)' : `gcc failed: ${e.stderr ?? e.message}`, { cause: e });
        });
        // A static executable has no program interpreter (PT_INTERP): ldd says so.
        const ldd = await promisify(execFile)('ldd', [out]).then((r) => r.stdout + r.stderr, (e: Error & { stdout?: string; stderr?: string }) => (e.stdout ?? '') + (e.stderr ?? ''));
        assert.match(ldd, /not a dynamic executable|statically linked/, ldd);
      }
      const batch = spawnSync(join(dir, 'nfnl-batch'), [], { input: '', timeout: 5000, encoding: 'utf8' });
      assert.equal(batch.status, 0, batch.stderr);
      assert.equal(batch.stdout + batch.stderr, '', 'empty input: nothing sent, nothing said');
      // Port 0: any free port, so the check needs no fixed port; the command sees the socket as fd 3.
      const listen = spawnSync(join(dir, 'health-listen'), ['sh', '-c', 'echo "$MULTUS_PROXY_HEALTH_FD"; readlink /proc/self/fd/3'], { env: { PATH: process.env['PATH'] ?? '', HEALTH_PORT: '0', HEALTH_HOST: '127.0.0.1' }, timeout: 5000, encoding: 'utf8' });
      assert.equal(listen.status, 0, listen.stderr);
      assert.match(listen.stdout, /^3\nsocket:\[\d+\]\n$/, listen.stderr);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

void describe('the build stage, replayed without Docker', () => {
  let ctx: string;
  let bare: string;
  let outputs: string[] = [];

  before(async () => {
    if (!existsSync(join(REPO, 'scripts', 'build.mjs'))) {
      throw new Error('scripts/build.mjs does not exist: `npm run build` (the Dockerfile\'s build stage) has nothing to run');
    }
    // The build context as the build stage sees it: only what its COPY lines bring in.
    ctx = mkdtempSync(join(tmpdir(), 'multus-proxy-image-'));
    for (const c of copies(build ?? { from: '', name: '', instructions: [] })) {
      for (const src of c.sources) {
        const abs = join(REPO, src);
        const files = statSync(abs).isDirectory() ? listFiles(abs) : [abs];
        for (const f of files) {
          const rel = f.slice(REPO.length + 1);
          if (ignored(dockerignore, rel)) continue;
          cpSync(f, join(ctx, rel));
        }
      }
    }
    // `npm ci` would install exactly package-lock.json; the repository's install stands in for it.
    symlinkSync(join(REPO, 'node_modules'), join(ctx, 'node_modules'));
    try {
      await promisify(execFile)('npm', ['run', 'build'], { cwd: ctx, maxBuffer: 16 * 1024 * 1024 });
    } catch (e) {
      const err = e as Error & { stdout?: string; stderr?: string };
      throw new Error(`npm run build in a copy of the build stage's context failed (a file the Dockerfile does not COPY?):\n${err.stdout ?? ''}${err.stderr ?? err.message}`, { cause: e });
    }
    outputs = existsSync(join(ctx, 'dist')) ? listFiles(join(ctx, 'dist')).map((f) => `/app/dist/${f.slice(join(ctx, 'dist').length + 1)}`) : [];
    // The runtime stage: dist/ alone, no node_modules anywhere above it.
    bare = mkdtempSync(join(tmpdir(), 'multus-proxy-runtime-'));
    cpSync(join(ctx, 'dist'), join(bare, 'app', 'dist'), { recursive: true });
  });

  after(() => {
    if (ctx) rmSync(ctx, { recursive: true, force: true });
    if (bare) rmSync(bare, { recursive: true, force: true });
  });

  void test('every bundle that is run is built: image CMD, manifests, injected sidecar', async () => {
    const wanted = new Map<string, string>();
    const cmd = runtime?.instructions.filter((i) => i.op === 'CMD').pop();
    if (cmd) for (const w of JSON.parse(cmd.args) as string[]) if (w.startsWith('/app/')) wanted.set(w, 'Dockerfile CMD');
    for (const dir of KUSTOMIZATIONS) {
      for (const o of await render(dir)) {
        for (const c of podSpec(o)?.containers ?? []) {
          for (const w of [...(c.command ?? []), ...(c.args ?? [])]) if (w.startsWith('/app/')) wanted.set(w, `${dir}: ${o.kind} ${o.metadata?.name}`);
        }
      }
    }
    for (const w of DEFAULT_SIDECAR_COMMAND) if (w.startsWith('/app/')) wanted.set(w, 'webhook default sidecar command');
    assert.deepEqual([...new Set(wanted.keys())].sort(), ['/app/dist/certs.js', '/app/dist/controller.js', '/app/dist/sidecar.js', '/app/dist/webhook.js']);
    for (const [file, who] of wanted) assert.ok(outputs.includes(file), `${who} runs ${file}, which npm run build does not produce (it made ${outputs.join(', ')})`);
  });

  void test('each bundle loads without node_modules (the runtime stage has none)', async () => {
    for (const { bundle, args, expect } of BUNDLE_RUNS) {
      const file = join(bare, 'app', 'dist', bundle);
      const r = await promisify(execFile)(process.execPath, [file, ...args], { cwd: dirname(file), env: { PATH: process.env['PATH'] ?? '' }, timeout: 20_000 }).then(
        (x) => ({ code: 0, out: x.stdout + x.stderr }),
        (e: Error & { code?: number; stdout?: string; stderr?: string }) => ({ code: typeof e.code === 'number' ? e.code : -1, out: (e.stdout ?? '') + (e.stderr ?? e.message) }),
      );
      assert.doesNotMatch(r.out, /ERR_MODULE_NOT_FOUND|Cannot find (module|package)/, `${bundle} needs a module at run time:\n${r.out}`);
      assert.ok(STARTED_EXIT_CODES.includes(r.code), `${bundle} exit ${r.code}:\n${r.out}`);
      assert.match(r.out, expect, `${bundle}:\n${r.out}`);
    }
  });
});
