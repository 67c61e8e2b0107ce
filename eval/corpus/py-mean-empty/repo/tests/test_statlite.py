import pytest

from statlite import StatisticsError, mean, spread, variance


def test_mean():
    assert mean([1, 2, 3, 4]) == 2.5


def test_mean_of_a_generator():
    assert mean(x for x in (2, 4)) == 3


def test_variance():
    assert variance([1, 1, 3, 3]) == 1


def test_empty_mean():
    with pytest.raises(StatisticsError):
        mean([])


def test_empty_spread():
    with pytest.raises(StatisticsError):
        spread([])
