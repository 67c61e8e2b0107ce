'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { range } = require('../range');

test('end excluded', () => {
  assert.deepStrictEqual(range(0, 3), [0, 1, 2]);
  assert.deepStrictEqual(range(0, 10, 5), [0, 5]);
  assert.deepStrictEqual(range(2, 2), []);
});
