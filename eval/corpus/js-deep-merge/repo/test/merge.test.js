'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { deepMerge } = require('../merge');

test('nested objects merge', () => {
  assert.deepStrictEqual(deepMerge({ a: { x: 1, y: 2 } }, { a: { y: 3 } }), { a: { x: 1, y: 3 } });
});

test('arrays replace', () => {
  assert.deepStrictEqual(deepMerge({ a: [1, 2] }, { a: [3] }), { a: [3] });
});

test('null replaces an object', () => {
  assert.deepStrictEqual(deepMerge({ a: { x: 1 } }, { a: null }), { a: null });
});

test('an object replaces null', () => {
  assert.deepStrictEqual(deepMerge({ a: null }, { a: { x: 1 } }), { a: { x: 1 } });
});

test('the base is not changed', () => {
  const base = { a: { x: 1 } };
  deepMerge(base, { a: { x: 2 } });
  assert.deepStrictEqual(base, { a: { x: 1 } });
});
