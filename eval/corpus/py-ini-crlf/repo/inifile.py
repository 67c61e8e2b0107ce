"""A small INI reader: sections, keys, values, comments."""


def parse_ini(text):
    """{section: {key: value}}; keys before any section go in ""."""
    data = {"": {}}
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            data.setdefault(section, {})
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ValueError("line without '=': %r" % raw)
        data[section][key.strip().lower()] = value
    return data
