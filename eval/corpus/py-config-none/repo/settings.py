"""Settings from a dict of environment-like strings."""

DEFAULTS = {"HOST": "localhost", "PORT": "8080", "DEBUG": "no"}


def get_setting(env, name):
    """The setting name from env, stripped, else its default, else None."""
    value = env.get(name, DEFAULTS.get(name))
    return value.strip()


def get_int(env, name):
    """The setting as an int, or None when it is not set at all."""
    value = get_setting(env, name)
    return int(value) if value is not None else None


def get_bool(env, name):
    value = get_setting(env, name)
    return value is not None and value.lower() in ("1", "yes", "true", "on")
