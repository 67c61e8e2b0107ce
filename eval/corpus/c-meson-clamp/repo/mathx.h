#pragma once

/* v, brought into [lo, hi]. */
int clamp(int v, int lo, int hi);
/* Linear interpolation between a and b at t/1000, t clamped to [0, 1000]. */
int lerp_permille(int a, int b, int t);
