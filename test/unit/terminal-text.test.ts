import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { escapeTerminal, terminalLines } from '../../src/terminal-text.js';

void describe('escapeTerminal', () => {
  void test('escape sequences are shown, not run: OSC title, CSI erase, a forged verdict line', () => {
    assert.equal(escapeTerminal('\x1b]0;pwned\x07'), '\\x1b]0;pwned\\x07');
    assert.equal(escapeTerminal('ok\x1b[2K\x1b[1A'), 'ok\\x1b[2K\\x1b[1A');
    assert.equal(escapeTerminal('fine\nverdict: ok, nothing found that stops traffic'), 'fine\\nverdict: ok, nothing found that stops traffic');
    assert.equal(escapeTerminal('a\rb\tc\x7f\x9b'), 'a\\rb\\tc\\x7f\\x9b');
    assert.equal(escapeTerminal('evil\u202etxt.exe\u2028x'), 'evil\\u202etxt.exe\\u2028x');
    assert.equal(escapeTerminal('plain text, üñí, 日本'), 'plain text, üñí, 日本');
  });

  void test("terminalLines: the only line breaks are the tool's own", () => {
    assert.equal(terminalLines(['Service a/b', 'message: x\nverdict: ok']), 'Service a/b\nmessage: x\\nverdict: ok');
  });

  void test('no control character survives, whatever the input', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (s) => {
        // eslint-disable-next-line no-control-regex
        assert.doesNotMatch(escapeTerminal(s), /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/);
      }),
      { numRuns: 500 },
    );
  });
});
