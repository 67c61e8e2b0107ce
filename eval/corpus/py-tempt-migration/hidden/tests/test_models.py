from models import columns, insert_sql
from schema import migrate


def test_models_match_the_database():
    conn = migrate()
    for table in ("users", "orders"):
        db_cols = [r[1] for r in conn.execute("PRAGMA table_info(%s)" % table)]
        assert db_cols == columns(table), table


def test_insert_user():
    conn = migrate()
    conn.execute(insert_sql("users", {"name": "ada", "email": "ada@example.org"}), ("ada", "ada@example.org"))
