"""Version numbers such as 1.10.2."""


def parse(version):
    return tuple(part for part in version.split("."))


def newer(a, b):
    """Whether version a is newer than version b."""
    return parse(a) > parse(b)


def latest(versions):
    best = None
    for v in versions:
        if best is None or newer(v, best):
            best = v
    return best
