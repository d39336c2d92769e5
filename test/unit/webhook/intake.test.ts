import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { NextFunction, Request, Response } from 'express';
import { claimOf, createIntake } from '../../../cmd/webhook/intake.js';

/** A request of `bytes` and its response, which emits 'close' when answered or abandoned. */
function call(bytes: number | undefined): { req: Request; res: Response & EventEmitter } {
  const req = { headers: bytes === undefined ? {} : { 'content-length': String(bytes) } } as unknown as Request;
  return { req, res: new EventEmitter() as Response & EventEmitter };
}

/** An intake, the names of the requests it let in, and a way to send one. */
function harness(budget: number, maxBody: number) {
  const intake = createIntake(budget, maxBody);
  const started: string[] = [];
  const go = (name: string, bytes: number) => {
    const c = call(bytes);
    intake.middleware(c.req, c.res, (() => started.push(name)) as NextFunction);
    return c;
  };
  return { intake, started, go };
}

void describe('webhook intake', () => {
  void test("a request's claim is its Content-Length, capped by the body limit; without one, the body limit", () => {
    assert.equal(claimOf('100', 1000), 100);
    assert.equal(claimOf('5000', 1000), 1000);
    assert.equal(claimOf(undefined, 1000), 1000);
    assert.equal(claimOf('junk', 1000), 1000);
    assert.equal(claimOf('-4', 1000), 1000);
  });

  void test('bodies in flight stay within the budget; the rest wait unread and go in arrival order as claims return', () => {
    const { intake, started, go } = harness(100, 1000);
    const a = go('a', 60);
    const b = go('b', 60);
    const c = go('c', 30);
    assert.deepEqual(started, ['a'], 'b would pass the budget, and c waits behind it (arrival order)');
    assert.deepEqual(intake.stats(), { inFlightBytes: 60, waiting: 2 });
    a.res.emit('close');
    assert.deepEqual(started, ['a', 'b', 'c']);
    assert.deepEqual(intake.stats(), { inFlightBytes: 90, waiting: 0 });
    b.res.emit('close');
    c.res.emit('close');
    c.res.emit('close');
    assert.deepEqual(intake.stats(), { inFlightBytes: 0, waiting: 0 }, 'a second close returns nothing twice');
  });

  void test('one request always gets in, whatever its size; a waiter that leaves is dropped and never started', () => {
    const { intake, started, go } = harness(100, 1000);
    const big = go('big', 500);
    const left = go('left', 10);
    const stays = go('stays', 10);
    assert.deepEqual(started, ['big']);
    left.res.emit('close');
    assert.deepEqual(intake.stats(), { inFlightBytes: 500, waiting: 1 });
    big.res.emit('close');
    assert.deepEqual(started, ['big', 'stays']);
    stays.res.emit('close');
    assert.deepEqual(intake.stats(), { inFlightBytes: 0, waiting: 0 });
  });
});
