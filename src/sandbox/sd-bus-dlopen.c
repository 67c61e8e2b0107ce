/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dlfcn.h>
#include <errno.h>

#include "log.h"
#include "macro.h"
#include "sd-bus-dlopen.h"

#define SD_BUS_DLSYM_FUNCTION(symbol) __typeof__(symbol) *sym_##symbol = NULL;
SD_BUS_SYMBOLS(SD_BUS_DLSYM_FUNCTION)

int dlopen_sd_bus(void) {
        static int cached = 1; /* 1: not tried yet */

        if (cached <= 0)
                return cached;

        /* Never closed: the pointers stay valid for the whole process. */
        void *dl = dlopen("libsystemd.so.0", RTLD_NOW | RTLD_NODELETE);
        if (!dl) {
                log_debug("Failed to load libsystemd.so.0: %s", dlerror());
                return (cached = -EOPNOTSUPP);
        }

#define SD_BUS_DLSYM_RESOLVE(symbol)                                            \
        sym_##symbol = (__typeof__(symbol) *) dlsym(dl, #symbol);               \
        if (!sym_##symbol) {                                                    \
                log_debug("libsystemd.so.0 lacks '%s'.", #symbol);              \
                return (cached = -EOPNOTSUPP);                                  \
        }
        SD_BUS_SYMBOLS(SD_BUS_DLSYM_RESOLVE)
#undef SD_BUS_DLSYM_RESOLVE

        return (cached = 0);
}
