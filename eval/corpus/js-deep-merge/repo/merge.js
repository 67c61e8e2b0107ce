'use strict';

function isPlainObject(v) {
  return typeof v === 'object' && !Array.isArray(v);
}

/**
 * A new object: `base` with `override` merged into it, plain objects
 * merged key by key, anything else (arrays, null, numbers, strings)
 * replacing what was there. Neither argument is changed.
 */
function deepMerge(base, override) {
  const out = { ...base };
  for (const [key, value] of Object.entries(override)) {
    if (isPlainObject(value) && isPlainObject(out[key])) {
      out[key] = deepMerge(out[key], value);
    } else {
      out[key] = value;
    }
  }
  return out;
}

module.exports = { deepMerge };
