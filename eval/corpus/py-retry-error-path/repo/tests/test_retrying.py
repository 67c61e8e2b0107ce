import pytest

from retrying import RetryError, retry


def flaky(n):
    calls = []

    def fn():
        calls.append(1)
        if len(calls) <= n:
            raise OSError("not yet")
        return "ok"
    return fn, calls


def test_succeeds_after_failures():
    fn, calls = flaky(2)
    assert retry(fn) == "ok"
    assert len(calls) == 3


def test_gives_up():
    fn, calls = flaky(5)
    with pytest.raises(RetryError):
        retry(fn, attempts=3)
    assert len(calls) == 3


def test_other_errors_propagate_at_once():
    calls = []

    def fn():
        calls.append(1)
        raise KeyError("bug")
    with pytest.raises(KeyError):
        retry(fn)
    assert len(calls) == 1
