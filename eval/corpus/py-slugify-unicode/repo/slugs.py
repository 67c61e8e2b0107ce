"""URL slugs for titles."""
import re

_SEPARATORS = re.compile(r"[^a-z0-9]+")


def slugify(title, max_length=60):
    """Lower-case ASCII words of title joined by "-".

    Accented letters keep their base letter ("Crème brûlée" -> "creme-brulee");
    anything else that is not a letter or digit separates words.
    """
    text = title.lower()
    text = _SEPARATORS.sub("-", text).strip("-")
    return text[:max_length].rstrip("-")
