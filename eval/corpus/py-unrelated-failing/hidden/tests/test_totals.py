from decimal import Decimal

from orders.totals import invoice_total, line_total


def test_line():
    assert line_total(3, "0.335") == Decimal("1.01")


def test_total():
    assert invoice_total([(1, "10.00"), (2, "2.50")]) == Decimal("15.00")


def test_discount_rounds_half_up():
    assert invoice_total([(1, "0.25")], discount_percent=10) == Decimal("0.23")
