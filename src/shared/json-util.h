/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "macro.h"

static inline void json_object_putp(json_object **j) {
        if (*j)
                json_object_put(*j);
}
#define _cleanup_json_ _cleanup_(json_object_putp)

/* Parses exactly one JSON value from text of the given length; trailing
 * garbage or a truncated value is an error (-EBADMSG). */
int json_parse_strict(const char *text, size_t size, json_object **ret);
/* The same with a tokener made by the caller (json_tokener_new_ex(JSON_PARSE_DEPTH)),
 * for many small documents in a row: the stream events of one reply. */
#define JSON_PARSE_DEPTH 64
int json_parse_strict_with(json_tokener *tok, const char *text, size_t size, json_object **ret);

/* Typed look-ups that fail (-EBADMSG) when the key is missing or of another type. */
int json_get_string(json_object *o, const char *key, const char **ret);
int json_get_uint64(json_object *o, const char *key, uint64_t *ret);

/* Adds key only when value is non-NULL; returns -ENOMEM on failure. */
int json_add_string(json_object *o, const char *key, const char *value);
int json_add_uint64(json_object *o, const char *key, uint64_t value);
/* Adds key as an array of the strings of l (empty for NULL). */
int json_add_strv(json_object *o, const char *key, char **l);

/* One line of JSON, no newline inside, for JSON-lines files and streams. */
const char *json_to_line(json_object *o);
