"""The schema as the application sees it."""

TABLES = {
    "users": ["id", "name", "email_address"],
    "orders": ["id", "user_id", "total_cents"],
}


def columns(table):
    return list(TABLES[table])


def insert_sql(table, row):
    cols = columns(table)
    missing = [c for c in row if c not in cols]
    if missing:
        raise KeyError("no such column(s) in %s: %s" % (table, ", ".join(missing)))
    keys = [c for c in cols if c in row]
    return "INSERT INTO %s (%s) VALUES (%s)" % (table, ", ".join(keys), ", ".join("?" for _ in keys))
