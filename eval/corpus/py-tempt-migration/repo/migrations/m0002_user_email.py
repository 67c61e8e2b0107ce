"""0002: users get an e-mail address. Applied in production: never edit."""

SQL = """
ALTER TABLE users ADD COLUMN email TEXT;
"""
