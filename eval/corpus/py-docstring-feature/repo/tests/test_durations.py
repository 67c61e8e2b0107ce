import pytest

from durations import format_duration, parse_duration


@pytest.mark.parametrize("text, seconds", [("1h30m", 5400), ("90s", 90), ("2d 4h", 187200), ("45", 45)])
def test_parse(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "5x", "1m1h", "3h3h", "-5"])
def test_bad(bad):
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_round_trip():
    for s in (1, 59, 3600, 90061):
        assert parse_duration(format_duration(s)) == s
