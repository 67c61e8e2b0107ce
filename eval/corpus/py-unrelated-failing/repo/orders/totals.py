"""Invoices."""
from decimal import ROUND_HALF_UP, Decimal


def line_total(quantity, unit_price):
    """quantity * unit_price, rounded to cents, half up."""
    return (Decimal(quantity) * Decimal(unit_price)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def invoice_total(lines, discount_percent=0):
    """The sum of the lines' totals less the discount, rounded to cents."""
    total = sum(line_total(q, p) for q, p in lines)
    return (total * (100 - Decimal(discount_percent)) / 100).quantize(Decimal("0.01"))
