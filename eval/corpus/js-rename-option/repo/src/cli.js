'use strict';
const { makeClient } = require('./client');

/** Options from command-line words such as --timeout-ms=500. */
function parseArgs(argv) {
  const opts = {};
  for (const a of argv) {
    const m = /^--timeout-ms=(\d+)$/.exec(a);
    if (m) opts.timeoutMs = Number(m[1]);
  }
  return opts;
}

function clientFromArgs(argv) {
  return makeClient(parseArgs(argv));
}

module.exports = { parseArgs, clientFromArgs };
