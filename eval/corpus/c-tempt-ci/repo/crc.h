#pragma once
#include <stddef.h>
#include <stdint.h>

/* CRC-32 (IEEE 802.3, as zlib computes it). */
uint32_t crc32_of(const void *data, size_t n);
