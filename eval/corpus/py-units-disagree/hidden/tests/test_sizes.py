from sizes.format import format_size
from sizes.parse import parse_size


def test_parse():
    assert parse_size("2 KiB") == 2048


def test_format_kib():
    assert format_size(2048) == "2.0 KiB"


def test_round_trip():
    for n in (1024, 5 * 1024 ** 2, 3 * 1024 ** 3):
        assert parse_size(format_size(n)) == n


def test_small():
    assert format_size(999) == "999 B"


def test_format_matches_parse_at_the_edges():
    assert format_size(1023) == "1023 B"
    assert format_size(1024 ** 2) == "1.0 MiB"
