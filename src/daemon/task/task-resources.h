/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

/* What a task has used, summed over all of its sandboxes: a sandbox made
 * anew after a restart or a pause adds to what the earlier ones used, so
 * each counter is what is banked from ended sandboxes plus what the live
 * one reports. Persisted with the progress in the state file; shown as the
 * Resources property, in status, the summary, the end-of-task journal
 * entry and the delivered tip's Agentfab-Resources: trailer. */

/* A counter nobody could read (no cgroup file, no price): shown as unknown,
 * never as 0. */
#define TASK_RESOURCE_UNKNOWN UINT64_MAX

#define TASK_CURRENCY_MAX 8U

typedef struct TaskResources {
        uint64_t cpu_usec;          /* the scopes' cpu.stat usage_usec */
        uint64_t memory_peak;       /* bytes: the largest of the scopes' peaks */
        uint64_t io_read_bytes;     /* io.stat rbytes */
        uint64_t io_write_bytes;    /* io.stat wbytes */
        uint64_t processes;         /* processes started in the sandboxes */
        uint64_t net_up_bytes;      /* through the egress proxy, to the net */
        uint64_t net_down_bytes;
        uint64_t net_connections;
        uint64_t model_calls;
        uint64_t tokens_in;         /* usage.prompt_tokens */
        uint64_t tokens_out;        /* usage.completion_tokens */
        uint64_t tokens_cached;     /* prompt tokens the server said it had cached */
        uint64_t wall_usec;
        /* Millionths of the currency's unit; TASK_RESOURCE_UNKNOWN when the
         * model profile gives no price. */
        uint64_t cost_micros;
        char currency[TASK_CURRENCY_MAX];
} TaskResources;

void task_resources_init(TaskResources *r);
/* Every counter unknown: for a reader of the Resources property, which
 * leaves out what nobody could read. */
void task_resources_init_unknown(TaskResources *r);
/* Sets the counter of that JSON name; -ENOENT for a name not known here
 * (a later daemon's), which a reader passes over. */
int task_resources_set(TaskResources *r, const char *name, uint64_t value);

/* One JSON object (the state file, status --json, the summary): every
 * counter by name, an unknown one as null. */
int task_resources_to_json(const TaskResources *r, json_object **ret);
int task_resources_from_json(TaskResources *r, json_object *j);

/* Adds a delta to a counter: an unknown delta changes nothing, a known one
 * makes an unknown counter known; saturates below TASK_RESOURCE_UNKNOWN. */
void task_resource_add(uint64_t *counter, uint64_t delta);
/* Keeps the larger of the counter and a sample (peaks). */
void task_resource_max(uint64_t *counter, uint64_t sample);

/* Letters only, shorter than TASK_CURRENCY_MAX. */
bool task_currency_is_valid(const char *s);

/* What tokens cost at prices per million tokens in millionths of the
 * currency's unit (micros.h), in millionths, rounded to the nearest;
 * TASK_RESOURCE_UNKNOWN when any input is. */
uint64_t task_resources_cost(uint64_t tokens_in, uint64_t tokens_out, uint64_t price_in, uint64_t price_out);
/* "cpu 12.3 s, memory 210 MiB, io 1.2/0.4 MiB, net 1.2 MiB, tokens 45210/3100,
 * 0.021 USD, wall 4 min 10 s": the trailer's and the journal's one line. */
char *task_resources_format(const TaskResources *r);
/* "850 B", "12 KiB", "1.2 MiB", "210 MiB": one decimal below 100 units. */
void task_resources_format_bytes(char buf[static 32], uint64_t v);
