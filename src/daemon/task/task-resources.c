/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"
#include "micros.h"
#include "task-resources.h"

/* The counters by their names in JSON, in the order status shows them. */
static const struct {
        const char *name;
        size_t offset;
} counters[] = {
        { "cpu_usec",        offsetof(TaskResources, cpu_usec) },
        { "memory_peak",     offsetof(TaskResources, memory_peak) },
        { "io_read_bytes",   offsetof(TaskResources, io_read_bytes) },
        { "io_write_bytes",  offsetof(TaskResources, io_write_bytes) },
        { "processes",       offsetof(TaskResources, processes) },
        { "net_up_bytes",    offsetof(TaskResources, net_up_bytes) },
        { "net_down_bytes",  offsetof(TaskResources, net_down_bytes) },
        { "net_connections", offsetof(TaskResources, net_connections) },
        { "model_calls",     offsetof(TaskResources, model_calls) },
        { "tokens_in",       offsetof(TaskResources, tokens_in) },
        { "tokens_out",      offsetof(TaskResources, tokens_out) },
        { "tokens_cached",   offsetof(TaskResources, tokens_cached) },
        { "wall_usec",       offsetof(TaskResources, wall_usec) },
        { "cost_micros",     offsetof(TaskResources, cost_micros) },
};

#define COUNTER(r, i) ((uint64_t *) ((uint8_t *) (r) + counters[i].offset))
#define COUNTER_CONST(r, i) ((const uint64_t *) ((const uint8_t *) (r) + counters[i].offset))

void task_resources_init(TaskResources *r) {
        assert(r);

        *r = (TaskResources) {
                .cost_micros = TASK_RESOURCE_UNKNOWN,
        };
}

void task_resources_init_unknown(TaskResources *r) {
        assert(r);

        task_resources_init(r);
        for (size_t i = 0; i < ELEMENTSOF(counters); i++)
                *COUNTER(r, i) = TASK_RESOURCE_UNKNOWN;
}

int task_resources_set(TaskResources *r, const char *name, uint64_t value) {
        assert(r);

        for (size_t i = 0; i < ELEMENTSOF(counters); i++)
                if (streq(counters[i].name, name)) {
                        *COUNTER(r, i) = value;
                        return 0;
                }
        return -ENOENT;
}

bool task_currency_is_valid(const char *s) {
        size_t n;

        if (!s)
                return false;
        n = strlen(s);
        if (n == 0 || n >= TASK_CURRENCY_MAX)
                return false;
        /* A code or a short name ("USD", "EUR", "credits"): it lands in a
         * commit trailer and the journal, so letters only. */
        for (const char *p = s; *p; p++)
                if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z')))
                        return false;
        return true;
}

int task_resources_to_json(const TaskResources *r, json_object **ret) {
        _cleanup_json_ json_object *j = NULL;

        assert(r);
        assert(ret);

        j = json_object_new_object();
        if (!j)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(counters); i++) {
                uint64_t v = *COUNTER_CONST(r, i);
                json_object *o = NULL;

                if (v != TASK_RESOURCE_UNKNOWN) {
                        o = json_object_new_uint64(v);
                        if (!o)
                                return -ENOMEM;
                }
                if (json_object_object_add(j, counters[i].name, o) < 0) {
                        json_object_put(o);
                        return -ENOMEM;
                }
        }
        if (r->currency[0] != '\0' && json_add_string(j, "currency", r->currency) < 0)
                return -ENOMEM;

        *ret = TAKE_PTR(j);
        return 0;
}

int task_resources_from_json(TaskResources *r, json_object *j) {
        TaskResources n;
        json_object *v;

        assert(r);

        /* A missing object or counter (a state file older than the
         * accounting) keeps its initial value; a wrong one is refused. */
        task_resources_init(&n);
        if (!j) {
                *r = n;
                return 0;
        }
        if (!json_object_is_type(j, json_type_object))
                return -EBADMSG;
        for (size_t i = 0; i < ELEMENTSOF(counters); i++) {
                if (!json_object_object_get_ex(j, counters[i].name, &v))
                        continue;
                if (json_object_is_type(v, json_type_null))
                        *COUNTER(&n, i) = TASK_RESOURCE_UNKNOWN;
                else if (json_object_is_type(v, json_type_int) && json_object_get_int64(v) >= 0)
                        *COUNTER(&n, i) = json_object_get_uint64(v);
                else if (json_object_is_type(v, json_type_int) && json_object_get_uint64(v) > (uint64_t) INT64_MAX)
                        *COUNTER(&n, i) = json_object_get_uint64(v);
                else
                        return -EBADMSG;
        }
        if (json_object_object_get_ex(j, "currency", &v) && !json_object_is_type(v, json_type_null)) {
                if (!json_object_is_type(v, json_type_string) || !task_currency_is_valid(json_object_get_string(v)))
                        return -EBADMSG;
                strcpy(n.currency, json_object_get_string(v));
        }

        *r = n;
        return 0;
}

void task_resource_add(uint64_t *counter, uint64_t delta) {
        assert(counter);

        if (delta == TASK_RESOURCE_UNKNOWN)
                return;
        if (*counter == TASK_RESOURCE_UNKNOWN)
                *counter = delta;
        else if (delta >= TASK_RESOURCE_UNKNOWN - *counter)
                /* Saturates one below unknown: a counter that ran out of
                 * bits is "very much", never "not known". */
                *counter = TASK_RESOURCE_UNKNOWN - 1;
        else
                *counter += delta;
}

void task_resource_max(uint64_t *counter, uint64_t sample) {
        assert(counter);

        if (sample == TASK_RESOURCE_UNKNOWN)
                return;
        if (*counter == TASK_RESOURCE_UNKNOWN || sample > *counter)
                *counter = sample;
}

uint64_t task_resources_cost(uint64_t tokens_in, uint64_t tokens_out, uint64_t price_in, uint64_t price_out) {
        unsigned __int128 c;

        if (tokens_in == TASK_RESOURCE_UNKNOWN || tokens_out == TASK_RESOURCE_UNKNOWN ||
            price_in == TASK_RESOURCE_UNKNOWN || price_out == TASK_RESOURCE_UNKNOWN)
                return TASK_RESOURCE_UNKNOWN;

        /* Prices are millionths of a unit per million tokens: the product
         * over 10^6 is millionths of a unit, rounded to the nearest. */
        c = (unsigned __int128) tokens_in * price_in + (unsigned __int128) tokens_out * price_out;
        c = (c + 500000U) / 1000000U;
        if (c >= TASK_RESOURCE_UNKNOWN)
                return TASK_RESOURCE_UNKNOWN - 1;
        return (uint64_t) c;
}

static int append(char **buf, size_t *len, const char *fmt, ...) _printf_(3, 4);
static int append(char **buf, size_t *len, const char *fmt, ...) {
        va_list ap;
        char *s = NULL, *n;
        int k;

        va_start(ap, fmt);
        k = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (k < 0)
                return -ENOMEM;
        n = realloc(*buf, *len + (size_t) k + 3);
        if (!n) {
                free(s);
                return -ENOMEM;
        }
        *buf = n;
        if (*len > 0) {
                memcpy(*buf + *len, ", ", 2);
                *len += 2;
        }
        memcpy(*buf + *len, s, (size_t) k + 1);
        *len += (size_t) k;
        free(s);
        return 0;
}

void task_resources_format_bytes(char buf[static 32], uint64_t v) {
        static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
        unsigned u = 0;
        uint64_t div = 1024;

        if (v < 1024) {
                snprintf(buf, 32, "%" PRIu64 " B", v);
                return;
        }
        while (u + 1 < ELEMENTSOF(units) && v / div >= 1024) {
                div *= 1024;
                u++;
        }
        if (v / div >= 100)
                snprintf(buf, 32, "%" PRIu64 " %s", v / div, units[u]);
        else {
                /* Tenths, rounded down, computed without overflow. */
                uint64_t tenths = (v / div) * 10 + (uint64_t) ((unsigned __int128) (v % div) * 10 / div);
                snprintf(buf, 32, "%" PRIu64 ".%" PRIu64 " %s", tenths / 10, tenths % 10, units[u]);
        }
}

/* "4.0 s", "4 min 10 s", "2 h 5 min". */
static void format_duration(char buf[static 48], uint64_t usec) {
        uint64_t s = usec / 1000000U;

        if (s < 60)
                snprintf(buf, 48, "%" PRIu64 ".%" PRIu64 " s", s, usec % 1000000U / 100000U);
        else if (s < 3600)
                snprintf(buf, 48, "%" PRIu64 " min %" PRIu64 " s", s / 60, s % 60);
        else
                snprintf(buf, 48, "%" PRIu64 " h %" PRIu64 " min", s / 3600, s % 3600 / 60);
}

char *task_resources_format(const TaskResources *r) {
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        char a[48], b[48];
        int k;

        assert(r);

        if (r->cpu_usec == TASK_RESOURCE_UNKNOWN)
                k = append(&buf, &len, "cpu unknown");
        else {
                format_duration(a, r->cpu_usec);
                k = append(&buf, &len, "cpu %s", a);
        }
        if (k < 0)
                return NULL;

        if (r->memory_peak == TASK_RESOURCE_UNKNOWN)
                k = append(&buf, &len, "memory unknown");
        else {
                task_resources_format_bytes(a, r->memory_peak);
                k = append(&buf, &len, "memory %s", a);
        }
        if (k < 0)
                return NULL;

        if (r->io_read_bytes == TASK_RESOURCE_UNKNOWN && r->io_write_bytes == TASK_RESOURCE_UNKNOWN)
                k = append(&buf, &len, "io unknown");
        else {
                if (r->io_read_bytes == TASK_RESOURCE_UNKNOWN)
                        strcpy(a, "unknown");
                else
                        task_resources_format_bytes(a, r->io_read_bytes);
                if (r->io_write_bytes == TASK_RESOURCE_UNKNOWN)
                        strcpy(b, "unknown");
                else
                        task_resources_format_bytes(b, r->io_write_bytes);
                k = append(&buf, &len, "io %s/%s", a, b);
        }
        if (k < 0)
                return NULL;

        if (r->net_up_bytes == TASK_RESOURCE_UNKNOWN || r->net_down_bytes == TASK_RESOURCE_UNKNOWN)
                k = append(&buf, &len, "net unknown");
        else {
                uint64_t t = r->net_up_bytes;
                task_resource_add(&t, r->net_down_bytes);
                task_resources_format_bytes(a, t);
                k = append(&buf, &len, "net %s", a);
        }
        if (k < 0)
                return NULL;

        if (r->tokens_in == TASK_RESOURCE_UNKNOWN || r->tokens_out == TASK_RESOURCE_UNKNOWN)
                k = append(&buf, &len, "tokens unknown");
        else
                k = append(&buf, &len, "tokens %" PRIu64 "/%" PRIu64, r->tokens_in, r->tokens_out);
        if (k < 0)
                return NULL;

        /* Money only where a price was given: "0 USD" would be a claim. */
        if (r->cost_micros != TASK_RESOURCE_UNKNOWN) {
                if (append(&buf, &len, "%s %s", format_micros(a, r->cost_micros), r->currency[0] ? r->currency : "USD") < 0)
                        return NULL;
        }

        if (r->wall_usec == TASK_RESOURCE_UNKNOWN)
                k = append(&buf, &len, "wall unknown");
        else {
                format_duration(a, r->wall_usec);
                k = append(&buf, &len, "wall %s", a);
        }
        if (k < 0)
                return NULL;

        return TAKE_PTR(buf);
}
