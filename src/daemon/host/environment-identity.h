/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What a branch says about where it was built: the environment's name, its
 * system's os-release PRETTY_NAME, and the administrator's Version= or a
 * digest over the image's top-level metadata. */

#include "environments.h"

/* "NAME (PRETTY_NAME; image DIGEST12)", "NAME (PRETTY_NAME; version V)" or,
 * for the host's system, "NAME (host: PRETTY_NAME; no image)". */
int environment_identity(const Environment *e, char **ret);
