"""Sliding windows over a sequence."""


def windows(values, size):
    """Every run of `size` consecutive items of `values`, in order."""
    if size <= 0:
        raise ValueError("size must be positive")
    return [values[i:i + size] for i in range(len(values) - size)]


def moving_average(values, size):
    """The mean of each window of `size` items."""
    return [sum(w) / size for w in windows(values, size)]
