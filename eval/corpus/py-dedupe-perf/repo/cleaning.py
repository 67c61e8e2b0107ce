"""Cleaning lists of records."""


def dedupe(items):
    """items without repeats, in the order of first appearance."""
    seen = []
    out = []
    for item in items:
        if item not in seen:
            seen.append(item)
            out.append(item)
    return out


def dedupe_by(items, key):
    """items without repeats of key(item), first appearance kept."""
    seen = set()
    out = []
    for item in items:
        k = key(item)
        if k not in seen:
            seen.add(k)
            out.append(item)
    return out
