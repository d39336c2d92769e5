/**
 * The image as scripts/build-images.sh builds it, run under a real containerd through its CRI API,
 * the way the kubelet runs it (crictl speaks the same API). The test starts a private containerd
 * (its own root, state, socket, runc root and CNI configuration) so it never meets the real node's,
 * imports the image tars, and runs every container in one pod sandbox whose network namespace is
 * its own (a bridge with no address and no route on the host: nothing leaves it).
 *
 * - Each of the four bundles starts in the image (its help, or its own configuration message).
 * - The sidecar, with the securityContext the webhook injects (cmd/webhook/mutate.ts, translated to
 *   CRI as the kubelet does): uid 0, CapEff/CapPrm/CapBnd exactly NET_ADMIN + NET_RAW (0x3000),
 *   NoNewPrivs, a read-only root file system; iptables-nft and iptables-legacy (v4 and v6) restore
 *   and save a nat chain in the pod's network namespace; run as injected, it fails only for want
 *   of a cluster.
 *
 * Everything it starts or creates (containerd, shims, containers, mounts, the bridge, cgroups,
 * its directory) is removed afterwards. Missing pieces fail with how to get them, never skip.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, rmdirSync, writeFileSync, closeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import type { V1Container } from '@kubernetes/client-node';
import { binDir } from '../harness/controlplane.js';
import { DEFAULT_SIDECAR_COMMAND, type SidecarConfig } from '../../cmd/webhook/options.js';
import { RUN_DIR, sidecarContainer } from '../../cmd/webhook/mutate.js';
import { BUNDLE_RUNS, STARTED_EXIT_CODES } from './bundles.js';
import { render } from '../../src/dataplane/core/incremental.js';
import { fullText, renderNft } from '../../src/dataplane/nftables/render.js';
import { encodeIntervalMapWrites } from '../../src/dataplane/nftables/netlink-batch.js';
import { equalRanges } from '../../src/dataplane/nftables/pick-ranges.js';
import { SHAPE_STATES, CLIENT_BLUE, ep, target } from '../sidecar/render-fixtures.js';

/**
 * A table of the nftables back end with every statement it writes (verdict maps, numgen picks,
 * endpoint maps, DNAT both families, SCTP, a dynamic affinity set with update, the reject chain), loaded by the
 * image's own `nft` under the sidecar's security context.
 */
const NFT_TABLE = fullText(
  renderNft(
    render({
      interfaces: [CLIENT_BLUE],
      targets: [
        ...SHAPE_STATES['shape-sctp'].targets,
        target('demo/sticky', '10.96.1.10', 80, [ep('192.168.101.3', 8080), ep('192.168.101.4', 8080)], { affinityTimeoutSeconds: 600 }),
      ],
    }).resolution.targets,
  ),
);

/**
 * A refill of one IPv4 endpoint map of that table, as the sidecar's element writer sends it: the
 * image's nfnl-batch must apply it under the same security context (netlink with NET_ADMIN only).
 */
const WRITER_MAP = /map (MPX-EPS-[A-Z0-9]+) \{\s*typeof [^\n]* : ip daddr/.exec(NFT_TABLE)?.[1] ?? '';
const WRITER_ADDRESSES = ['10.251.0.1', '10.251.0.2', '10.251.0.3'];
const WRITER_BATCH = Buffer.from(
  encodeIntervalMapWrites(
    [{ table: 'multus_proxy', map: WRITER_MAP, family: 4, ranges: equalRanges(WRITER_ADDRESSES.length).map((r, i) => ({ ...r, ip: WRITER_ADDRESSES[i] ?? '', port: 8080 })) }],
    1,
  ),
).toString('base64');

const run = promisify(execFile);
const CACHE = dirname(binDir());
const IMAGE_DIR = join(CACHE, 'images');
const SETUP_HINT = 'run scripts/setup.sh (it installs containerd and runc and builds crictl, the CNI plugins and the images)';
const CGROUP_PARENT = `/mpx-imgtest-${process.pid}`;
const BRIDGE = `mpxi${process.pid % 100000}`;
/** The sidecar's capabilities, NET_ADMIN (12) and NET_RAW (13), as /proc/<pid>/status prints them. */
const NET_ADMIN_RAW = '0000000000003000';

interface ImageEntry {
  readonly file: string;
  readonly name: string;
}

function images(): ImageEntry[] {
  const path = join(IMAGE_DIR, 'images.json');
  if (!existsSync(path)) throw new Error(`${path} not found: ${SETUP_HINT}`);
  return JSON.parse(readFileSync(path, 'utf8')) as ImageEntry[];
}

function projectImage(list: readonly ImageEntry[]): ImageEntry {
  const pkg = JSON.parse(readFileSync(join(import.meta.dirname, '..', '..', 'package.json'), 'utf8')) as { version: string };
  const want = `docker.io/library/multus-proxy:${pkg.version}`;
  const found = list.find((i) => i.name === want);
  if (!found) throw new Error(`${want} is not in ${IMAGE_DIR}/images.json (${list.map((i) => i.name).join(', ')}): ${SETUP_HINT}`);
  return found;
}

async function which(cmd: string): Promise<string> {
  try {
    return (await run('sh', ['-c', `command -v ${cmd}`])).stdout.trim();
  } catch {
    throw new Error(`${cmd} not found in PATH: ${SETUP_HINT}`);
  }
}

/** The CRI securityContext the kubelet derives from a container's Kubernetes securityContext. */
function criSecurityContext(c: V1Container): Record<string, unknown> {
  const sc = c.securityContext ?? {};
  return {
    ...(sc.runAsUser !== undefined ? { run_as_user: { value: sc.runAsUser } } : {}),
    capabilities: { add_capabilities: sc.capabilities?.add ?? [], drop_capabilities: sc.capabilities?.drop ?? [] },
    privileged: sc.privileged ?? false,
    readonly_rootfs: sc.readOnlyRootFilesystem ?? false,
    // The kubelet sets no_new_privs unless privilege escalation is allowed.
    no_new_privs: sc.allowPrivilegeEscalation === false,
    ...(sc.seccompProfile?.type === 'RuntimeDefault' ? { seccomp: { profile_type: 0 } } : {}),
  };
}

interface Exited {
  readonly code: number;
  readonly out: string;
}

class PrivateContainerd {
  readonly sock: string;
  private proc: ChildProcess | undefined;
  private sandbox: string | undefined;
  /** Host folders containerd creates if missing; removed afterwards if this test created them. */
  private readonly hostDirs = ['/run/containerd/s', '/run/containerd', '/var/run/netns'].filter((d) => !existsSync(d));

  constructor(readonly dir: string) {
    this.sock = join(dir, 'containerd.sock');
  }

  async start(cniBin: string, pauseImage: string): Promise<void> {
    const d = this.dir;
    for (const sub of ['root', 'state', 'runc', 'cni-conf', 'ipam', 'logs', 'opt']) mkdirSync(join(d, sub), { recursive: true });
    writeFileSync(
      join(d, 'cni-conf', '10-imgtest.conflist'),
      JSON.stringify({
        cniVersion: '1.0.0',
        name: 'mpx-imgtest',
        // No gateway, no masquerade: the bridge has no address and the host no route to the pod.
        plugins: [{ type: 'bridge', bridge: BRIDGE, isGateway: false, ipMasq: false, ipam: { type: 'host-local', ranges: [[{ subnet: '10.251.0.0/24' }]], dataDir: join(d, 'ipam') } }],
      }),
    );
    // restrict_oom_score_adj: root here lacks CAP_SYS_RESOURCE, and runc fails to set a negative
    // oom_score_adj without it. cgroupfs: no systemd on these machines.
    writeFileSync(
      join(d, 'config.toml'),
      [
        'version = 2',
        `root = "${d}/root"`,
        `state = "${d}/state"`,
        `[grpc]\n  address = "${this.sock}"`,
        `[ttrpc]\n  address = "${this.sock}.ttrpc"`,
        `[plugins."io.containerd.internal.v1.opt"]\n  path = "${d}/opt"`,
        '[plugins."io.containerd.grpc.v1.cri"]',
        `  sandbox_image = "${pauseImage}"`,
        '  restrict_oom_score_adj = true',
        '  stream_server_address = "127.0.0.1"',
        '  stream_server_port = "0"',
        '  [plugins."io.containerd.grpc.v1.cri".containerd]',
        '    snapshotter = "overlayfs"',
        '    default_runtime_name = "runc"',
        '    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]',
        '      runtime_type = "io.containerd.runc.v2"',
        '      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]',
        '        SystemdCgroup = false',
        `        Root = "${d}/runc"`,
        '  [plugins."io.containerd.grpc.v1.cri".cni]',
        `    bin_dir = "${cniBin}"`,
        `    conf_dir = "${d}/cni-conf"`,
        '',
      ].join('\n'),
    );
    const log = openSync(join(d, 'containerd.log'), 'a');
    this.proc = spawn(await which('containerd'), ['--config', join(d, 'config.toml')], { stdio: ['ignore', log, log] });
    closeSync(log);
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (this.proc.exitCode !== null) throw new Error(`containerd exited with ${this.proc.exitCode}:\n${this.log()}`);
      try {
        await this.crictl('info');
        return;
      } catch (e) {
        if (Date.now() > deadline) throw new Error(`containerd's CRI did not answer within 30 s: ${(e as Error).message}\n${this.log()}`, { cause: e });
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }

  log(): string {
    try {
      return readFileSync(join(this.dir, 'containerd.log'), 'utf8').split('\n').slice(-30).join('\n');
    } catch {
      return '';
    }
  }

  async ctr(...args: string[]): Promise<string> {
    return (await run('ctr', ['--address', this.sock, '--namespace', 'k8s.io', ...args], { maxBuffer: 16 << 20 })).stdout;
  }

  /** crictl against this containerd; its stdout (and stderr too with `all`). */
  async crictl(...args: string[]): Promise<string> {
    return (await this.crictlAll(...args)).stdout;
  }

  async crictlAll(...args: string[]): Promise<{ stdout: string; stderr: string }> {
    const endpoint = `unix://${this.sock}`;
    return run(join(binDir(), 'crictl'), ['--runtime-endpoint', endpoint, '--image-endpoint', endpoint, '--timeout', '60s', ...args], { maxBuffer: 16 << 20 });
  }

  async runSandbox(): Promise<void> {
    const pod = join(this.dir, 'pod.json');
    writeFileSync(
      pod,
      JSON.stringify({
        metadata: { name: 'image-test', namespace: 'default', uid: `image-test-${process.pid}`, attempt: 0 },
        hostname: 'image-test',
        log_directory: join(this.dir, 'logs'),
        linux: { cgroup_parent: CGROUP_PARENT, security_context: { namespace_options: { network: 0, pid: 1, ipc: 0 } } },
      }),
    );
    this.sandbox = (await this.crictl('runp', pod)).trim().split('\n').pop();
  }

  /** Creates, starts and waits for one container in the sandbox; its exit code and output. */
  async runContainer(name: string, spec: Record<string, unknown>): Promise<Exited> {
    if (this.sandbox === undefined) throw new Error('no sandbox');
    const file = join(this.dir, `${name}.json`);
    writeFileSync(file, JSON.stringify({ metadata: { name }, log_path: `${name}.log`, ...spec }));
    const id = (await this.crictl('create', this.sandbox, file, join(this.dir, 'pod.json'))).trim().split('\n').pop() ?? '';
    try {
      await this.crictl('start', id);
      const deadline = Date.now() + 60_000;
      for (;;) {
        const status = (JSON.parse(await this.crictl('inspect', '-o', 'json', id)) as { status: { state: string; exitCode?: number } }).status;
        if (status.state === 'CONTAINER_EXITED') {
          const r = await this.crictlAll('logs', id);
          return { code: status.exitCode ?? 0, out: r.stdout + r.stderr };
        }
        if (Date.now() > deadline) throw new Error(`container ${name} still ${status.state} after 60 s`);
        await new Promise((r) => setTimeout(r, 200));
      }
    } finally {
      await this.crictl('rm', '-f', id).catch(() => undefined);
    }
  }

  /** Removes everything: pods (CNI DEL), containerd and its shims, mounts, bridge, cgroups, files. */
  async stop(): Promise<string[]> {
    const problems: string[] = [];
    if (this.proc && this.proc.exitCode === null) {
      await this.crictl('rmp', '-fa').catch((e: Error) => problems.push(`crictl rmp: ${e.message}`));
      const exited = new Promise((r) => this.proc?.once('exit', r));
      this.proc.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
      if (this.proc.exitCode === null && this.proc.signalCode === null) {
        this.proc.kill('SIGKILL');
        await exited;
      }
    }
    // Shims of this containerd (their command line names its socket) exit once their sandbox is
    // removed; one still there after 5 s was left behind.
    for (let i = 0; ; i++) {
      const shims = this.shims();
      if (shims.length === 0) break;
      if (i === 25) {
        for (const pid of shims) process.kill(pid, 'SIGKILL');
        problems.push(`shims ${shims.join(', ')} were left running`);
        break;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    const mounts = readFileSync('/proc/self/mounts', 'utf8')
      .split('\n')
      .map((l) => l.split(' ')[1] ?? '')
      .filter((m) => m.startsWith(this.dir))
      .reverse();
    for (const m of mounts) await run('umount', ['-l', m]).catch((e: Error) => problems.push(`umount ${m}: ${e.message}`));
    await run('ip', ['link', 'del', BRIDGE]).catch(() => undefined);
    for (const ctl of readdirSync('/sys/fs/cgroup')) {
      const dir = join('/sys/fs/cgroup', ctl, CGROUP_PARENT);
      if (!existsSync(dir)) continue;
      for (const sub of readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory())) {
        try {
          rmdirSync(join(dir, sub.name));
        } catch (e) {
          problems.push(`cgroup ${join(dir, sub.name)}: ${(e as Error).message}`);
        }
      }
      try {
        rmdirSync(dir);
      } catch (e) {
        problems.push(`cgroup ${dir}: ${(e as Error).message}`);
      }
    }
    rmSync(this.dir, { recursive: true, force: true });
    // Shim sockets live in /run/containerd/s whatever the state dir.
    for (const dir of this.hostDirs) {
      try {
        rmdirSync(dir);
      } catch {
        // not empty: another containerd (the real node's) uses it now
      }
    }
    return problems;
  }

  private shims(): number[] {
    const out: number[] = [];
    for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
      try {
        const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
        if (cmd.includes('containerd-shim') && cmd.includes(this.sock)) out.push(Number(pid));
      } catch {
        // exited meanwhile
      }
    }
    return out;
  }
}

/** The check the sidecar's own runtime makes, as JSON: capabilities, user, root fs, iptables. */
const PROBE = `
const fs = require('node:fs'), cp = require('node:child_process');
const status = fs.readFileSync('/proc/self/status', 'utf8');
const field = (k) => (new RegExp('^' + k + ':\\\\s*(\\\\S+)', 'm').exec(status) || [])[1];
let rootfs = 'writable';
try { fs.writeFileSync('/probe', 'x'); } catch (e) { rootfs = e.code; }
const iptables = {};
for (const [tool, dst, to] of [['iptables', '10.96.0.99/32', '10.251.0.9:80'], ['ip6tables', 'fd00:10:96::99/128', '[fd00::9]:80']]) {
  for (const backend of ['nft', 'legacy']) {
    const chain = 'MPXIMG-' + backend.toUpperCase();
    const input = '*nat\\n:' + chain + ' - [0:0]\\n-A OUTPUT -j ' + chain + '\\n-A ' + chain + ' -d ' + dst + ' -p tcp --dport 80 -j DNAT --to-destination ' + to + '\\nCOMMIT\\n';
    const restore = cp.spawnSync(tool + '-' + backend + '-restore', ['--noflush'], { input, encoding: 'utf8' });
    const save = cp.spawnSync(tool + '-' + backend + '-save', ['-t', 'nat'], { encoding: 'utf8' });
    iptables[tool + '-' + backend] = { restore: restore.status, error: (restore.stderr || '') + (restore.error ? String(restore.error) : ''), saved: (save.stdout || '').includes('-A ' + chain + ' -d ' + dst) };
  }
}
const nftLoad = cp.spawnSync('nft', ['-f', '-'], { input: NFT_TABLE_TEXT, encoding: 'utf8' });
const nftList = cp.spawnSync('nft', ['list', 'table', 'inet', 'multus_proxy'], { encoding: 'utf8' });
const nft = { load: nftLoad.status, error: (nftLoad.stderr || '') + (nftLoad.error ? String(nftLoad.error) : ''), listed: /numgen random mod 2 0 goto MPX-SEP-/.test(nftList.stdout || '') && / to numgen random mod 4294967295 map @MPX-EPS-/.test(nftList.stdout || '') && /update @MPX-AFF-/.test(nftList.stdout || '') };
const w = cp.spawnSync('/usr/local/bin/nfnl-batch', [], { input: Buffer.from(WRITER.batch, 'base64'), encoding: 'utf8' });
const wList = cp.spawnSync('nft', ['list', 'map', 'inet', 'multus_proxy', WRITER.map], { encoding: 'utf8' });
const writer = { code: w.status, out: (w.stdout || '').trim(), error: (w.stderr || '') + (w.error ? String(w.error) : ''), listed: WRITER.addresses.every((a) => (wList.stdout || '').includes(a + ' . 8080')), list: wList.stdout || wList.stderr };
console.log(JSON.stringify({ nft, writer, uid: process.getuid(), capEff: field('CapEff'), capPrm: field('CapPrm'), capBnd: field('CapBnd'), capAmb: field('CapAmb'), noNewPrivs: field('NoNewPrivs'), seccomp: field('Seccomp'), rootfs, iptables }));
`;

void describe('the built image under containerd (CRI, as the kubelet runs it)', () => {
  let cd: PrivateContainerd | undefined;
  let image: ImageEntry;
  let sidecar: V1Container;
  const volumeDir = (): string => join(cd?.dir ?? '', 'run-volume');

  before(async () => {
    const list = images();
    image = projectImage(list);
    const pause = list.find((i) => i.name.startsWith('registry.k8s.io/pause:'));
    if (!pause) throw new Error(`no registry.k8s.io/pause image in ${IMAGE_DIR}/images.json: ${SETUP_HINT}`);
    for (const f of [image.file, pause.file]) if (!existsSync(join(IMAGE_DIR, f))) throw new Error(`${join(IMAGE_DIR, f)} not found: ${SETUP_HINT}`);
    if (!existsSync(join(binDir(), 'crictl'))) throw new Error(`crictl not found in ${binDir()}: ${SETUP_HINT}`);
    const cniBin = join(CACHE, 'cni-bin');
    for (const p of ['bridge', 'host-local', 'loopback']) if (!existsSync(join(cniBin, p))) throw new Error(`CNI plugin ${p} not found in ${cniBin}: ${SETUP_HINT}`);
    await which('runc');
    await which('ctr');
    cd = new PrivateContainerd(mkdtempSync('/tmp/mpx-imgtest-'));
    await cd.start(cniBin, pause.name);
    for (const f of [pause.file, image.file]) await cd.ctr('images', 'import', join(IMAGE_DIR, f));
    await cd.runSandbox();
    mkdirSync(volumeDir());
    const cfg: SidecarConfig = {
      image: image.name,
      imagePullPolicy: 'IfNotPresent',
      mode: 'native',
      privileged: false,
      healthPort: 9090,
      logLevel: 'info',
      backend: 'auto',
      command: DEFAULT_SIDECAR_COMMAND,
      args: [],
      resources: {},
      tokenExpirationSeconds: 3600,
      maxServicesPerNetwork: 2000,
    };
    sidecar = sidecarContainer(cfg, 'token', true);
  });

  after(async () => {
    const problems = (await cd?.stop()) ?? [];
    assert.deepEqual(problems, [], 'cleanup');
  });

  /** The injected sidecar as CRI config: its securityContext, env (downward API resolved) and volume. */
  function asInjected(command: readonly string[]): Record<string, unknown> {
    const envs = (sidecar.env ?? []).map((e) => ({ key: e.name, value: e.value ?? (e.valueFrom?.fieldRef?.fieldPath === 'metadata.name' ? 'client' : 'default') }));
    return {
      image: { image: image.name },
      command,
      envs,
      mounts: [{ container_path: RUN_DIR, host_path: volumeDir() }],
      linux: { security_context: criSecurityContext(sidecar) },
    };
  }

  void test('the image is Node.js 24', async () => {
    const r = await cd?.runContainer('node-version', { image: { image: image.name }, command: ['node', '--version'] });
    assert.equal(r?.code, 0, r?.out);
    assert.match(r?.out ?? '', /^v24\./m);
  });

  void test('each bundle starts as the manifests run it', async () => {
    for (const { bundle, args, expect } of BUNDLE_RUNS) {
      // The image's own user (the Deployments' runAsUser), except the sidecar, run as injected.
      const spec =
        bundle === 'sidecar.js'
          ? { ...asInjected(['node', `/app/dist/${bundle}`, ...args]), envs: [] }
          : { image: { image: image.name }, command: ['node', `/app/dist/${bundle}`, ...args] };
      const r = await cd?.runContainer(bundle.replace('.js', ''), spec);
      assert.ok(r);
      assert.doesNotMatch(r.out, /ERR_MODULE_NOT_FOUND|Cannot find (module|package)/, `${bundle}:\n${r.out}`);
      assert.ok(STARTED_EXIT_CODES.includes(r.code), `${bundle} exit ${r.code}:\n${r.out}`);
      assert.match(r.out, expect, `${bundle}:\n${r.out}`);
    }
  });

  void test('the injected sidecar command starts and stops only for want of a cluster', async () => {
    assert.deepEqual(sidecar.command, [...DEFAULT_SIDECAR_COMMAND]);
    const r = await cd?.runContainer('sidecar-injected', asInjected(sidecar.command ?? []));
    assert.ok(r);
    assert.notEqual(r.code, 0, r.out);
    assert.match(r.out, /no Kubernetes configuration found/, r.out);
  });

  void test('as injected: uid 0, exactly NET_ADMIN + NET_RAW, no new privileges, read-only root fs, both iptables back ends, nft loads the nftables back end\'s table, and nfnl-batch refills an endpoint map', async (t) => {
    const r = await cd?.runContainer('sidecar-probe', asInjected(['node', '-e', `const NFT_TABLE_TEXT = ${JSON.stringify(NFT_TABLE)};\nconst WRITER = ${JSON.stringify({ batch: WRITER_BATCH, map: WRITER_MAP, addresses: WRITER_ADDRESSES })};\n${PROBE}`]));
    assert.ok(r);
    assert.equal(r.code, 0, r.out);
    const line = r.out.split('\n').find((l) => l.startsWith('{'));
    assert.ok(line, r.out);
    t.diagnostic(line);
    const p = JSON.parse(line) as {
      uid: number;
      capEff: string;
      capPrm: string;
      capBnd: string;
      capAmb: string;
      noNewPrivs: string;
      seccomp: string;
      rootfs: string;
      iptables: Record<string, { restore: number; error: string; saved: boolean }>;
      nft: { load: number; error: string; listed: boolean };
      writer: { code: number; out: string; error: string; listed: boolean; list: string };
    };
    // The nftables back end's whole table, loaded by the image's nft with only NET_ADMIN/NET_RAW and RuntimeDefault seccomp.
    assert.equal(p.nft.load, 0, `nft -f: ${p.nft.error}`);
    assert.ok(p.nft.listed, 'nft list table does not show the affinity picks, the endpoint-map DNAT and the affinity update');
    // The element writer (nfnl-batch) refills an endpoint map over netlink under the same context.
    assert.notEqual(WRITER_MAP, '', 'the table has an IPv4 endpoint map');
    assert.deepEqual([p.writer.code, p.writer.out], [0, 'ok'], `nfnl-batch: ${p.writer.error}`);
    assert.ok(p.writer.listed, `the refilled map does not list the three addresses:\n${p.writer.list}`);
    assert.equal(p.uid, 0);
    assert.equal(p.capEff, NET_ADMIN_RAW, 'CapEff');
    assert.equal(p.capPrm, NET_ADMIN_RAW, 'CapPrm');
    assert.equal(p.capBnd, NET_ADMIN_RAW, 'CapBnd');
    assert.equal(p.capAmb, '0000000000000000', 'CapAmb');
    assert.equal(p.noNewPrivs, '1', 'NoNewPrivs');
    assert.equal(p.seccomp, '2', 'Seccomp (RuntimeDefault filter)');
    assert.equal(p.rootfs, 'EROFS', 'a write to / must fail with EROFS');
    assert.deepEqual(Object.keys(p.iptables).sort(), ['ip6tables-legacy', 'ip6tables-nft', 'iptables-legacy', 'iptables-nft']);
    for (const [tool, res] of Object.entries(p.iptables)) {
      assert.equal(res.restore, 0, `${tool}-restore: ${res.error}`);
      assert.ok(res.saved, `${tool}-save does not show the chain's rule`);
    }
  });
});
