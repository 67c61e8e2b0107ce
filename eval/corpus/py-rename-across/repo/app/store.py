"""The user store."""

_USERS = {1: {"id": 1, "name": "ada"}, 2: {"id": 2, "name": "grace"}}


def fetch_user(user_id):
    """The user with this id, or None."""
    return _USERS.get(user_id)
