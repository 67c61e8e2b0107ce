#pragma once
#include <stdbool.h>
#include <stddef.h>

#define RING_CAPACITY 8

typedef struct Ring {
        int items[RING_CAPACITY];
        size_t head, count;     /* head: the oldest item */
} Ring;

void ring_init(Ring *r);
/* Appends v; when full, the oldest item is dropped. */
void ring_push(Ring *r, int v);
/* Takes the oldest item into *v; false when empty. */
bool ring_pop(Ring *r, int *v);
size_t ring_count(const Ring *r);
