'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { escapeHtml, attr } = require('../escape');

test('the usual suspects', () => {
  assert.strictEqual(escapeHtml('<a href="x">&</a>'), '&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;');
});

test('single quotes, for attributes in single quotes', () => {
  assert.strictEqual(escapeHtml("it's"), 'it&#39;s');
});

test('non-strings', () => {
  assert.strictEqual(escapeHtml(42), '42');
  assert.strictEqual(attr('title', "O'Brien & co"), 'title="O&#39;Brien &amp; co"');
});
