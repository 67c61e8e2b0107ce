'use strict';

/** The integers from `start` up to but not including `end`, by `step`. */
function range(start, end, step = 1) {
  const out = [];
  for (let i = start; i <= end; i += step) out.push(i);
  return out;
}

module.exports = { range };
