#pragma once

/* Parses a decimal int (optional sign, no spaces, nothing after it) into
 * *ret. Returns 0, -EINVAL for text that is not a number (*ret untouched),
 * or -ERANGE for one that does not fit in an int (*ret untouched). */
int parse_int(const char *s, int *ret);
