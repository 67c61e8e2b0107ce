'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { paginate } = require('../lib/paginate');

const items = Array.from({ length: 25 }, (_, i) => i + 1);

test('first page', () => {
  assert.deepStrictEqual(paginate(items, 1).items, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
});

test('a partial last page counts', () => {
  assert.strictEqual(paginate(items, 1).pages, 3);
  assert.deepStrictEqual(paginate(items, 3).items, [21, 22, 23, 24, 25]);
});

test('exact multiple', () => {
  assert.strictEqual(paginate(items.slice(0, 20), 1).pages, 2);
});

test('empty list has no pages', () => {
  assert.strictEqual(paginate([], 1).pages, 0);
});
