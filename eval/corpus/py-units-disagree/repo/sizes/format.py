"""Human-readable sizes."""
from .units import SUFFIXES


def format_size(n):
    """n bytes as "1.5 MiB", "12 KiB" or "999 B" (one decimal below 10)."""
    for suffix, size in SUFFIXES:
        if n >= size:
            value = n / size
            return ("%.1f %s" if value < 10 else "%.0f %s") % (value, suffix)
    return "%d B" % n
