"""What the web layer shows."""
from .store import fetch_user


def profile_page(user_id):
    user = fetch_user(user_id)
    if user is None:
        return "404 no such user"
    return "<h1>%s</h1>" % user["name"]
