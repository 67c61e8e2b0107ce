/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "tools.h"
#include "tap.h"
int main(void) { return tap_done(); }
