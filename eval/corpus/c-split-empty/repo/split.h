#pragma once
#include <stddef.h>

/* Splits s at each sep into at most max fields, copied into buf (of size
 * bufsize), pointers in fields[]. Empty fields count: "a,,b" has three, ""
 * has one (empty). Returns the number of fields, or -1 if they do not fit. */
int split(const char *s, char sep, char *buf, size_t bufsize, char **fields, int max);
