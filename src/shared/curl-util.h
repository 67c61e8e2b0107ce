/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* For the parts that talk HTTP with libcurl (the model client, the forge
 * client); header-only, so that src/shared itself needs no libcurl. */

#include <curl/curl.h>
#include <errno.h>

/* SECURITY: http and https only, also for redirects (which callers refuse
 * anyway): no file://, no scp://, nothing else libcurl could speak. */
static inline int curl_restrict_protocols(CURL *e) {
#if LIBCURL_VERSION_NUM >= 0x075500 /* 7.85: the _STR options, the others deprecated */
        if (curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https") != CURLE_OK)
                return -EIO;
#else
        if (curl_easy_setopt(e, CURLOPT_PROTOCOLS, (long) (CURLPROTO_HTTP | CURLPROTO_HTTPS)) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS, (long) (CURLPROTO_HTTP | CURLPROTO_HTTPS)) != CURLE_OK)
                return -EIO;
#endif
        return 0;
}
