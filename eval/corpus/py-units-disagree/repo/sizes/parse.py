"""Sizes as people write them."""
import re

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]iB|B)?\s*$")
_FACTORS = {"B": 1, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3}


def parse_size(text):
    """ "1.5 MiB" -> 1572864; a plain number is bytes."""
    m = _SIZE.match(text)
    if not m:
        raise ValueError("not a size: %r" % text)
    return int(float(m.group(1)) * _FACTORS[m.group(2) or "B"])
