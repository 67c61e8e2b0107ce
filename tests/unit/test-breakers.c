/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "breakers.h"
#include "tap.h"
int main(void) { return tap_done(); }
