#pragma once
#include <stddef.h>

/* The number of code points in the UTF-8 string s (assumed valid). */
size_t utf8_length(const char *s);
/* The number of columns s takes in a terminal: code points, but combining
 * marks (U+0300..U+036F) take none. */
size_t utf8_columns(const char *s);
