from numbers_in import parse_number


def test_decimal_comma_is_a_decimal():
    # The German finance team: "1,5" is one and a half.
    assert parse_number("1,5") == 1.5


def test_decimal_comma_is_a_thousands_separator():
    # The US sales team: "1,5" is fifteen (a mistyped "1,500" style separator dropped).
    assert parse_number("1,5") == 15
