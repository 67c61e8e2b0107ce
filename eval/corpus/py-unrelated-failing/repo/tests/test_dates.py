import datetime

from orders.dates import due_date, is_overdue


def test_due_date_skips_weekend():
    assert due_date(datetime.date(2024, 1, 5), days=1) == datetime.date(2024, 1, 8)


def test_not_overdue_today():
    # Known failure, unrelated: depends on the day the suite runs (issue 118).
    assert not is_overdue(datetime.date(2020, 1, 1))
