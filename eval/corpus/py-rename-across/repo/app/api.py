"""The JSON API."""
from . import store


def get_user(user_id):
    user = store.fetch_user(user_id)
    return {"error": "not found"} if user is None else dict(user)
