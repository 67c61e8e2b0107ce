'use strict';

/** A promise that rejects after `ms` milliseconds unless `p` settles first. */
function withTimeout(p, ms) {
  let timer;
  const t = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

module.exports = { withTimeout };
