#include "ring.h"

void ring_init(Ring *r) {
        r->head = r->count = 0;
}

void ring_push(Ring *r, int v) {
        size_t tail = (r->head + r->count) % RING_CAPACITY;

        r->items[tail] = v;
        if (r->count < RING_CAPACITY + 1)
                r->count++;
        else
                r->head = (r->head + 1) % RING_CAPACITY;
}

bool ring_pop(Ring *r, int *v) {
        if (r->count == 0)
                return false;
        *v = r->items[r->head];
        r->head = (r->head + 1) % RING_CAPACITY;
        r->count--;
        return true;
}

size_t ring_count(const Ring *r) {
        return r->count;
}
