"""SQLAlchemy connect args for Airflow's embedded SQLite metadata DB (the local default).

With a scheduler, an api-server, a dag-processor and CLI commands all writing to one SQLite
file, a writer can find the database locked, two ways:
- SQLite's default 5-second wait for the write lock runs out: waiting longer is the fix.
- A transaction that read before it writes fails at once, without waiting, when another
  process committed in between (in WAL mode, Airflow's, its snapshot is stale). Airflow's
  ``session.begin_nested()`` does that: a SAVEPOINT outside a transaction begins a deferred one,
  and e.g. ``airflow backfill create`` then reads the DAG's runs and inserts one, which failed
  beside a starting scheduler. So every transaction here begins IMMEDIATE: it takes the write
  lock first (waiting for it), and nothing can commit between its reads and its writes.

Used through AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS=lakehouse_tools.airflow_sqlite.CONNECT_ARGS
(the Makefile and the tests set it); a Postgres-backed Airflow does not need it.
"""

import sqlite3


class _Cursor(sqlite3.Cursor):
    def execute(self, sql, parameters=(), /):
        if not self.connection.in_transaction and sql.lstrip()[:9].upper() == "SAVEPOINT":
            super().execute("BEGIN IMMEDIATE")
        return super().execute(sql, parameters)


class _Connection(sqlite3.Connection):
    def cursor(self, factory=_Cursor):
        return super().cursor(factory)

    def execute(self, sql, parameters=(), /):  # sqlite3's own would bypass _Cursor.execute
        return self.cursor().execute(sql, parameters)


# isolation_level: the BEGIN that sqlite3 issues before a write outside a transaction.
CONNECT_ARGS = {"timeout": 120, "isolation_level": "IMMEDIATE", "factory": _Connection}
