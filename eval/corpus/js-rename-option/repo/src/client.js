'use strict';
const { withTimeout } = require('./timeout');

const DEFAULTS = { retries: 2, timeoutMs: 1000 };

function makeClient(options = {}) {
  const opts = { ...DEFAULTS, ...options };
  return {
    options: opts,
    call(fn) {
      return withTimeout(fn(), opts.timeoutMs);
    },
  };
}

module.exports = { makeClient, DEFAULTS };
