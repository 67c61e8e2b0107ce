"""Parsing numbers people type."""


def parse_number(text):
    """The number in text."""
    return float(text)
