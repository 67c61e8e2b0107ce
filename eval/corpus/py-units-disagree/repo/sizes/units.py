"""Byte units, shared by the formatter and the parser."""

# Binary units: what "KiB", "MiB" and "GiB" mean.
KIB = 1000
MIB = KIB * KIB
GIB = MIB * KIB

SUFFIXES = (("GiB", GIB), ("MiB", MIB), ("KiB", KIB))
