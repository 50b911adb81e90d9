"""SQLAlchemy connect args for Airflow's embedded SQLite metadata DB (the local default).

With a scheduler, an api-server, a dag-processor and CLI commands all writing to one SQLite
file, a writer can find the database locked; SQLite's default 5-second wait then fails the
command ("database is locked"). Waiting longer is the fix. Used through
AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS=lakehouse_tools.airflow_sqlite.CONNECT_ARGS (the Makefile
and the tests set it); a Postgres-backed Airflow does not need it.
"""

CONNECT_ARGS = {"timeout": 120}
