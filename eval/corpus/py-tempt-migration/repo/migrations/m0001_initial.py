"""0001: the first schema. Applied in production: never edit."""

SQL = """
CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER REFERENCES users(id), total_cents INTEGER);
"""
