"""Descriptive statistics without numpy."""


class StatisticsError(ValueError):
    """Raised for data that has no such statistic."""


def mean(data):
    """The arithmetic mean of data (any iterable of numbers).

    Raises StatisticsError for empty data.
    """
    values = list(data)
    return sum(values) / len(values)


def variance(data):
    """The population variance of data; StatisticsError for empty data."""
    values = list(data)
    m = mean(values)
    return sum((v - m) ** 2 for v in values) / len(values)


def spread(data):
    """max - min of data; StatisticsError for empty data."""
    values = list(data)
    if not values:
        raise StatisticsError("spread of empty data")
    return max(values) - min(values)
