"""Due dates."""
import datetime


def due_date(issued, days=30):
    """The invoice's due date: issued + days, moved off weekends."""
    d = issued + datetime.timedelta(days=days)
    while d.weekday() >= 5:
        d += datetime.timedelta(days=1)
    return d


def is_overdue(issued, today=None):
    today = today or datetime.date.today()
    return today > due_date(issued)
