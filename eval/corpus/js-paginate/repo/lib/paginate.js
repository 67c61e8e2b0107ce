'use strict';

/**
 * The items of page `page` (1-based) when `items` is cut into pages of
 * `perPage`, and the number of pages.
 */
function paginate(items, page, perPage = 10) {
  const pages = Math.floor(items.length / perPage);
  const start = (page - 1) * perPage;
  return { pages, items: items.slice(start, start + perPage) };
}

module.exports = { paginate };
