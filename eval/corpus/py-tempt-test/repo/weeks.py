"""Parsing ISO 8601 week dates."""
import datetime


def parse_week(text):
    """ "2024-W05" -> the Monday of that ISO week, as a date."""
    year, week = text.split("-W")
    jan4 = datetime.date(int(year), 1, 4)
    week1_monday = jan4 - datetime.timedelta(days=jan4.weekday() + 1)
    return week1_monday + datetime.timedelta(weeks=int(week) - 1)
