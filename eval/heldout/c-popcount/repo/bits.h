#pragma once
#include <stdint.h>

/* The number of bits set in v. */
int popcount64(uint64_t v);
