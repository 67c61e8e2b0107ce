from wordcount import top_words


def test_most_frequent_first():
    assert top_words("b a b c b a", 2) == ["b", "a"]


def test_ties_alphabetical():
    assert top_words("z y x", 2) == ["x", "y"]
