/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <string.h>

#include "json-util.h"

int json_parse_strict_with(json_tokener *tok, const char *text, size_t size, json_object **ret) {
        json_object *o;

        if (size > INT32_MAX)
                return -EFBIG;
        if (memchr(text, '\0', size))
                return -EBADMSG;

        json_tokener_reset(tok);
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
        o = json_tokener_parse_ex(tok, text, (int) size);
        enum json_tokener_error e = json_tokener_get_error(tok);
        size_t used = json_tokener_get_parse_end(tok);

        if (!o || e != json_tokener_success) {
                json_object_put(o);
                return -EBADMSG;
        }
        /* Only whitespace may follow. */
        for (size_t i = used; i < size; i++)
                if (!strchr(" \t\r\n", text[i])) {
                        json_object_put(o);
                        return -EBADMSG;
                }
        *ret = o;
        return 0;
}

int json_parse_strict(const char *text, size_t size, json_object **ret) {
        json_tokener *tok;
        int r;

        if (size > INT32_MAX)
                return -EFBIG;
        tok = json_tokener_new_ex(JSON_PARSE_DEPTH);
        if (!tok)
                return -ENOMEM;
        r = json_parse_strict_with(tok, text, size, ret);
        json_tokener_free(tok);
        return r;
}

int json_get_string(json_object *o, const char *key, const char **ret) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
                return -EBADMSG;
        *ret = json_object_get_string(v);
        return 0;
}

int json_get_uint64(json_object *o, const char *key, uint64_t *ret) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
                return -EBADMSG;
        /* json-c keeps negative numbers as int64; refuse them rather than wrap. */
        if (json_object_get_int64(v) < 0 && json_object_get_uint64(v) <= INT64_MAX)
                return -EBADMSG;
        *ret = json_object_get_uint64(v);
        return 0;
}

int json_add_string(json_object *o, const char *key, const char *value) {
        if (!value)
                return 0;
        json_object *v = json_object_new_string(value);
        if (!v)
                return -ENOMEM;
        if (json_object_object_add(o, key, v) < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}

int json_add_uint64(json_object *o, const char *key, uint64_t value) {
        json_object *v = json_object_new_uint64(value);
        if (!v)
                return -ENOMEM;
        if (json_object_object_add(o, key, v) < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}

int json_add_strv(json_object *o, const char *key, char **l) {
        json_object *a = json_object_new_array();

        if (!a || json_object_object_add(o, key, a) < 0) {
                json_object_put(a);
                return -ENOMEM;
        }
        for (char **i = l; i && *i; i++)
                if (json_object_array_add(a, json_object_new_string(*i)) < 0)
                        return -ENOMEM;
        return 0;
}

const char *json_to_line(json_object *o) {
        return json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}
