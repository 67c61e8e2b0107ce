"""Applies the migrations to a SQLite database."""
import importlib
import pkgutil
import sqlite3

import migrations


def migrate(db=":memory:"):
    conn = sqlite3.connect(db)
    for m in sorted(pkgutil.iter_modules(migrations.__path__), key=lambda m: m.name):
        conn.executescript(importlib.import_module("migrations." + m.name).SQL)
    return conn
