/**
 * The shared options module (src/cli.ts) and every program's --help: each program answers with its
 * flags, their environment variables and defaults, and exits 0 (run as a real process, as the
 * README shows it).
 */
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { NODE_AGENT_PROGRAM } from '../../cmd/node-agent/options.js';
import { connectionFlags, connectionValues, helpText, parseFlags, wantsHelp, type Program } from '../../src/cli.js';
import { CONTROLLER_PROGRAM } from '../../cmd/controller/options.js';
import { WEBHOOK_PROGRAM } from '../../cmd/webhook/options.js';
import { SIDECAR_PROGRAM } from '../../cmd/sidecar/options.js';
import { CERTS_PROGRAM } from '../../cmd/certs/cli.js';

const root = resolve(import.meta.dirname, '..', '..');

const DEMO: Program = {
  name: 'demo',
  about: 'a demo',
  usage: 'demo [flags]',
  flags: [
    { name: 'port', value: 'N', env: 'DEMO_PORT', def: '80', help: 'the port' },
    { name: 'tag', value: 'T', multiple: true, help: 'a tag' },
    { name: 'dry-run', help: 'do nothing' },
  ],
};

void describe('src/cli.ts', () => {
  void test('parses strings, repeated flags, switches and positionals', () => {
    const r = parseFlags(DEMO, ['go', '--port', '8080', '--tag=a', '--tag', 'b', '--dry-run'], { positionals: true });
    assert.ok(r.ok);
    assert.deepEqual(r.value.values, { port: '8080', tag: ['a', 'b'], 'dry-run': 'true' });
    assert.deepEqual(r.value.positionals, ['go']);
  });
  void test('an unknown flag or a stray positional is an error naming the program and the known flags', () => {
    const bad = parseFlags(DEMO, ['--prot', '1']);
    assert.equal(bad.ok, false);
    assert.match(bad.ok ? '' : bad.error, /^demo: Unknown option '--prot'.*known flags: --port, --tag, --dry-run \(see --help\)/);
    assert.equal(parseFlags(DEMO, ['stray']).ok, false);
    assert.equal(parseFlags(DEMO, ['--port']).ok, false, 'a string flag without its value');
  });
  void test('help text lists every flag with its value, variable, default and repeatability', () => {
    const text = helpText(DEMO);
    assert.match(text, /^demo: a demo\n\nusage: demo \[flags\]\n/);
    assert.match(text, /--port N +the port \(env DEMO_PORT; default 80\)/);
    assert.match(text, /--tag T +a tag \(repeatable\)/);
    assert.match(text, /--dry-run +do nothing\n/);
    assert.match(text, /--help +this text/);
  });
  void test('connection flags: --kubeconfig (KUBECONFIG) and --context parsed into optional fields; empty is not given', () => {
    const program: Program = { ...DEMO, flags: connectionFlags({ kubeconfig: 'the file', context: 'the context' }, 'FILE') };
    assert.match(helpText(program), /--kubeconfig FILE +the file \(env KUBECONFIG\)\n +--context NAME +the context\n/);
    const given = parseFlags(program, ['--kubeconfig', '/k', '--context', 'c']);
    assert.ok(given.ok);
    assert.deepEqual(connectionValues(given.value.values), { kubeconfig: '/k', context: 'c' });
    const empty = parseFlags(program, ['--kubeconfig', '', '--context=']);
    assert.ok(empty.ok);
    assert.deepEqual(connectionValues(empty.value.values), {});
  });
  void test('wantsHelp: --help or -h anywhere', () => {
    assert.equal(wantsHelp(['--port', '1', '--help']), true);
    assert.equal(wantsHelp(['-h']), true);
    assert.equal(wantsHelp(['--port', '1']), false);
  });
});

const PROGRAMS: [string, string, Program][] = [
  ['controller', 'cmd/controller/main.ts', CONTROLLER_PROGRAM],
  ['webhook', 'cmd/webhook/main.ts', WEBHOOK_PROGRAM],
  ['sidecar', 'cmd/sidecar/main.ts', SIDECAR_PROGRAM],
  ['certs', 'cmd/certs/cli.ts', CERTS_PROGRAM],
  ['node-agent', 'cmd/node-agent/main.ts', NODE_AGENT_PROGRAM],
];

void describe('every program answers --help and exits 0', () => {
  for (const [name, entry, program] of PROGRAMS) {
    void test(name, () => {
      // No environment that could configure it: the help must not depend on one.
      const r = spawnSync(process.execPath, ['--import', 'tsx', entry, '--help'], { cwd: root, encoding: 'utf8', env: { PATH: process.env['PATH'] ?? '' }, timeout: 60_000 });
      assert.equal(r.status, 0, `${name} --help exited ${String(r.status)}: ${r.stderr}`);
      assert.match(r.stdout, new RegExp(`^${program.name}: `));
      for (const f of program.flags) {
        assert.ok(r.stdout.includes(`--${f.name}`), `${name} --help does not list --${f.name}`);
        if (f.env !== undefined) assert.ok(r.stdout.includes(`env ${f.env}`), `${name} --help does not name ${f.env}`);
      }
      assert.match(r.stdout, /default /, `${name} --help shows no default`);
      assert.equal(r.stderr, '');
    });
  }
  void test('each program has the npm script the README shows (`npm run <name> -- --help`)', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    for (const [name, entry] of PROGRAMS) assert.equal(pkg.scripts[name], `node --import tsx ${entry}`, `package.json has no script "${name}" running ${entry}`);
  });
  void test('the defaults shown are the ones parsed', () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'cmd/webhook/main.ts', '--help'], { cwd: root, encoding: 'utf8', env: { PATH: process.env['PATH'] ?? '' } });
    assert.match(r.stdout, /--port N .*default 8443\)/);
    assert.match(r.stdout, /--sidecar-health-port N .*default 9180\)/);
    const s = spawnSync(process.execPath, ['--import', 'tsx', 'cmd/sidecar/main.ts', '-h'], { cwd: root, encoding: 'utf8', env: { PATH: process.env['PATH'] ?? '' } });
    assert.match(s.stdout, /--drift-check-interval-ms MS .*default 60000\)/);
  });
});
