import pytest

from textstats.window import moving_average, windows


def test_windows_of_two():
    assert windows([1, 2, 3], 2) == [[1, 2], [2, 3]]


def test_moving_average():
    assert moving_average([2, 4, 6, 8], 2) == [3, 5, 7]


def test_bad_size():
    with pytest.raises(ValueError):
        windows([1], 0)


def test_whole_sequence_is_one_window():
    assert windows([1, 2, 3], 3) == [[1, 2, 3]]


def test_window_longer_than_sequence():
    assert windows([1, 2], 3) == []
