from mailwrap import wrap


def test_short():
    assert wrap("a b c", 10) == ["a b c"]


def test_exact_width_fits():
    assert wrap("aaaa bbbbb", 10) == ["aaaa bbbbb"]


def test_breaks():
    assert wrap("aaaa bbbbb c", 10) == ["aaaa bbbbb", "c"]


def test_long_word():
    assert wrap("x" * 12 + " y", 10) == ["x" * 12, "y"]
