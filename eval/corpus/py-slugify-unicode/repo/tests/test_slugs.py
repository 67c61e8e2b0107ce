from slugs import slugify


def test_plain_title():
    assert slugify("Hello, World!") == "hello-world"


def test_accents_keep_their_letters():
    assert slugify("Crème brûlée") == "creme-brulee"


def test_length_limit():
    assert slugify("a" * 80) == "a" * 60
