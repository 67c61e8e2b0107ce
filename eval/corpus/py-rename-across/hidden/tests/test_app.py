from app import api, views
from app.store import load_user


def test_load_user():
    assert load_user(1)["name"] == "ada"
    assert load_user(9) is None


def test_views_and_api():
    assert views.profile_page(2) == "<h1>grace</h1>"
    assert api.get_user(9) == {"error": "not found"}


def test_old_name_is_gone():
    import app.store
    assert not hasattr(app.store, "fetch_user")
