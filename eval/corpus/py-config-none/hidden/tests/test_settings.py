from settings import get_bool, get_int, get_setting


def test_from_env():
    assert get_setting({"HOST": " example.org "}, "HOST") == "example.org"


def test_default():
    assert get_int({}, "PORT") == 8080


def test_unknown_is_none():
    assert get_setting({}, "TIMEOUT") is None
    assert get_int({}, "TIMEOUT") is None


def test_bool():
    assert get_bool({"DEBUG": "Yes"}, "DEBUG") is True
    assert get_bool({}, "VERBOSE") is False


def test_explicit_none_value_is_unset():
    assert get_setting({"HOST": None}, "HOST") == "localhost"
    assert get_int({"TIMEOUT": None}, "TIMEOUT") is None
