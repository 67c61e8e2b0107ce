/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* A reader of the part of TOML that dependency manifests use
 * (pyproject.toml, Cargo.toml, Cargo.lock): [tables] and [[arrays of
 * tables]] with bare, quoted and dotted keys; basic, literal and multi-line
 * strings; arrays (across lines, nested); inline tables; other scalars
 * (numbers, booleans, dates) as their raw text. It does not build a
 * document: it calls back once per scalar, with the table's and the key's
 * path, so that a manifest reader picks what it knows and ignores the rest.
 * Not a validator: duplicate keys are not detected. */

#define TOML_PATH_MAX 16U       /* components of a table + key path */
#define TOML_DEPTH_MAX 16U      /* nesting of arrays and inline tables */

typedef struct TomlValue {
        const char *const *table;       /* components of the current [table] */
        size_t n_table;
        unsigned table_index;           /* counts table headers: a new [[x]] entry has a new one */
        const char *const *key;         /* components of the key, inline tables' keys appended */
        size_t n_key;
        const char *value;              /* a string's decoded text or a scalar's raw text */
        bool is_string;
        bool in_array;                  /* an element of an array */
        unsigned line;
} TomlValue;

typedef int (*toml_callback_t)(const TomlValue *v, void *userdata);

/* -EBADMSG (with a message naming the line in *ret_error when non-NULL)
 * on malformed input; a negative return of the callback stops the walk
 * and is returned. */
int toml_walk(const char *text, size_t size, toml_callback_t cb, void *userdata, char **ret_error);
