'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { makeClient, DEFAULTS } = require('../src/client');
const { parseArgs, clientFromArgs } = require('../src/cli');

test('the option is called timeout', () => {
  assert.strictEqual(DEFAULTS.timeout, 1000);
  assert.strictEqual(DEFAULTS.timeoutMs, undefined);
});

test('the client uses it', async () => {
  const c = makeClient({ timeout: 20 });
  await assert.rejects(c.call(() => new Promise(() => {})), /timed out after 20 ms/);
});

test('the command line sets it', () => {
  assert.deepStrictEqual(parseArgs(['--timeout=500']), { timeout: 500 });
  assert.strictEqual(clientFromArgs(['--timeout=7']).options.timeout, 7);
});
