/**
 * B5's image runtime, pure parts: buildah's image list, ldd's missing libraries, and the
 * webhook's injected sidecar container mapped onto the copy of the image's node and bundle.
 */
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { injectedOnHost, missingLibraries, parseImageList } from '../lib/image-runtime.js';
import { sidecarContainer } from '../../cmd/webhook/mutate.js';
import { SIDECAR } from '../../test/webhook/fixtures.js';

void describe('B5 image runtime', () => {
  void test('parseImageList: ids by name:tag, sha256: prefix dropped, untagged layers left out', () => {
    const text = [
      'docker.io/library/multus-proxy:0.1.0                    sha256:0ea8018b98b05f0e4dbfcd7c87e1dd29505076c4b53d58c20c1b1e8d9d662231',
      '<none>:<none>                                           sha256:18682bc389960632ff0fbb5ca295a8bca02b5d3cffc345cc1f5de5f06fbcfc3a',
      'docker.io/library/node:24-bookworm-slim                 sha256:830e132e08a95a445eb4b48ae8a5f1f0946b437b65f3c7c4ad26e9a75a78ea7a',
      '',
    ].join('\n');
    const ids = parseImageList(text);
    assert.equal(ids.get('docker.io/library/multus-proxy:0.1.0'), '0ea8018b98b05f0e4dbfcd7c87e1dd29505076c4b53d58c20c1b1e8d9d662231');
    assert.equal(ids.size, 2);
    assert.equal(parseImageList('').size, 0);
  });

  void test('missingLibraries: only the "not found" lines', () => {
    const ok = '\tlinux-vdso.so.1 (0x00007fa8ab4a4000)\n\tlibstdc++.so.6 => /lib/x86_64-linux-gnu/libstdc++.so.6 (0x00007fa8ab200000)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007fa8ab4a6000)\n';
    assert.deepEqual(missingLibraries(ok), []);
    assert.deepEqual(missingLibraries(`${ok}\tlibatomic.so.1 => not found\n\tlibfoo.so.2 => not found\n`), ['libatomic.so.1', 'libfoo.so.2']);
  });

  void test('injectedOnHost: the injected command on the copied node and bundle (without health-listen), with the image and container environment', () => {
    const container = sidecarContainer(SIDECAR, 'token', true);
    assert.equal(container.command?.[0], '/usr/local/bin/health-listen');
    const imageEnv = ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', 'NODE_ENV=production', 'XTABLES_LOCKFILE=/dev/shm/xtables.lock'];
    const got = injectedOnHost(container, imageEnv, '/cache/image-runtime/0ea8018b98b0');
    assert.equal(got.binary, '/cache/image-runtime/0ea8018b98b0/node');
    assert.deepEqual(got.argv, ['--max-semi-space-size=1', '--optimize-for-size', '/cache/image-runtime/0ea8018b98b0/dist/sidecar.js']);
    // The image's NODE_ENV, the webhook's cap and malloc settings; not PATH, in-container paths (the pod info files), or what B5 sets for every runtime.
    assert.deepEqual(got.env, { NODE_ENV: 'production', MAX_SERVICES_PER_NETWORK: '2000', MALLOC_MMAP_THRESHOLD_: '32768', MALLOC_TRIM_THRESHOLD_: '65536' });
  });

  void test('injectedOnHost: a command that is not node is refused', () => {
    assert.throws(() => injectedOnHost({ command: ['/bin/sh', '-c', 'x'] }, [], '/r'), /not node/);
    assert.throws(() => injectedOnHost({}, [], '/r'), /not node/);
    assert.throws(() => injectedOnHost({ command: ['/usr/local/bin/health-listen', 'sh'] }, [], '/r'), /starts with sh, not node/);
  });
});
