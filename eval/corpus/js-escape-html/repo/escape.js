'use strict';

const MAP = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' };

/** text with every character that is special in HTML text or in a quoted
 * attribute value (& < > " ') replaced by its entity. */
function escapeHtml(text) {
  return String(text).replace(/[&<>"]/g, (c) => MAP[c]);
}

function attr(name, value) {
  return `${name}="${escapeHtml(value)}"`;
}

module.exports = { escapeHtml, attr };
