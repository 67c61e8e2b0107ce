"""Counting words."""
import re

_WORD = re.compile(r"[A-Za-z']+")


def top_words(text, n=3):
    """The n most frequent words of text, lower-cased, most frequent first;
    ties in alphabetical order."""
    counts = {}
    for w in _WORD.findall(text.lower()):
        counts[w] = counts.get(w, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]))
    return [w for w, _ in ranked[:n]]
