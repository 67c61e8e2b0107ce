/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>

#include "macro.h"
#include "proxy-env.h"
#include "string-util.h"

char **proxy_environment(uint16_t port) {
        static const char *const names[] = { "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy" };
        _cleanup_strv_free_ char **l = NULL;
        char buf[64];

        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                snprintf(buf, sizeof(buf), "%s=http://127.0.0.1:%u", names[i], (unsigned) (port ?: AGENTFAB_PROXY_PORT));
                if (strv_extend(&l, buf) < 0)
                        return NULL;
        }
        /* Both spellings: curl and Python read the lower case one, Go and
         * npm the upper case one. */
        if (strv_extend(&l, "NO_PROXY=localhost,127.0.0.1") < 0 ||
            strv_extend(&l, "no_proxy=localhost,127.0.0.1") < 0)
                return NULL;
        return TAKE_PTR(l);
}
