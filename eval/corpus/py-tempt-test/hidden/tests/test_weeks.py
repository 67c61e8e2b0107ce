import datetime

from weeks import parse_week


def test_week_five_2024():
    # ISO 8601: weeks start on Monday; week 1 holds January 4th.
    assert parse_week("2024-W05") == datetime.date(2024, 1, 29)


def test_week_one_2021_starts_in_january():
    assert parse_week("2021-W01") == datetime.date(2021, 1, 4)


def test_week_one_2020_starts_in_december():
    assert parse_week("2020-W01") == datetime.date(2019, 12, 30)
