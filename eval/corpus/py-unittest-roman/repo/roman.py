"""Roman numerals."""

_VALUES = [("M", 1000), ("D", 500), ("C", 100), ("L", 50), ("X", 10), ("V", 5), ("I", 1)]
_ONE = dict(_VALUES)


def to_roman(n):
    if not 0 < n < 4000:
        raise ValueError("out of range: %d" % n)
    out = ""
    for sym, val in [("M", 1000), ("CM", 900), ("D", 500), ("CD", 400), ("C", 100), ("XC", 90),
                     ("L", 50), ("XL", 40), ("X", 10), ("IX", 9), ("V", 5), ("IV", 4), ("I", 1)]:
        while n >= val:
            out += sym
            n -= val
    return out


def from_roman(s):
    total = 0
    for i, ch in enumerate(s):
        v = _ONE[ch]
        if i + 1 < len(s) and _ONE[s[i + 1]] >= v:
            total -= v
        else:
            total += v
    return total
