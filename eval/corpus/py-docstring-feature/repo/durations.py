"""Durations as people write them."""

_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def parse_duration(text):
    """Seconds in a duration such as "1h30m", "90s", "2d 4h" or "45".

    Units are d, h, m and s, each at most once and in that order; spaces
    between parts are allowed; a plain number is seconds. Anything else
    (an empty string, an unknown unit, a unit twice or out of order, a
    negative number) raises ValueError.
    """
    raise NotImplementedError


def format_duration(seconds):
    """The inverse of parse_duration: 5400 -> "1h30m", 0 -> "0s"."""
    if seconds == 0:
        return "0s"
    out = []
    for unit, size in _UNITS.items():
        n, seconds = divmod(seconds, size)
        if n:
            out.append("%d%s" % (n, unit))
    return "".join(out)
