"""PostgreSQL for Airflow's metadata DB: Debian's server on 127.0.0.1 with a data folder of its own.

Usage:
    python include/cluster/local_postgres.py install|start|stop|status|url

    install  apt-get install Debian's postgresql if no server is found (as root, quietly; else a no-op)
    start    initdb on the first start, start the server, create the role and database if missing
    stop     pg_ctl stop -m fast, then -m immediate, then SIGKILL of what is left of the server
    status   exit 0 if the server runs, 3 if not
    url      print the SQLAlchemy URL, for AIRFLOW__DATABASE__SQL_ALCHEMY_CONN

Settings (environment; ``make postgres-start`` passes its variables):
    POSTGRES_DIR      data/, postgres.log, the password files          (<repo>/.local/postgres)
    POSTGRES_PORT     15432 (not 5432, which a system PostgreSQL may hold)
    POSTGRES_DB       airflow
    POSTGRES_USER     airflow (owns POSTGRES_DB; not a superuser)
    POSTGRES_RUN_AS   who runs the server when root starts it           (postgres)
    POSTGRES_BINDIR   the server's programs              (the newest /usr/lib/postgresql/*/bin)

PostgreSQL refuses to run as root: started by root, the server runs as POSTGRES_RUN_AS (the
``postgres`` user Debian's package creates), who then owns POSTGRES_DIR and must be able to
reach it (every parent folder searchable); started by anyone else, it runs as that user.
The server listens on 127.0.0.1 only (no Unix socket) and asks for scram-sha-256 passwords. They
are random, made on the first start and kept in POSTGRES_DIR (mode 0600): superuser.password for
the ``postgres`` superuser, <POSTGRES_USER>.password for the application role.
"""

from __future__ import annotations

import glob
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
SUPERUSER = "postgres"
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 30
_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")  # role and database names used unquoted in SQL


class PostgresError(RuntimeError):
    """The server cannot be installed, started or reached; the message says what to do."""


def find_bindir() -> Path | None:
    """POSTGRES_BINDIR, else the newest Debian server (/usr/lib/postgresql/N/bin), else PATH's."""
    if os.environ.get("POSTGRES_BINDIR"):
        return Path(os.environ["POSTGRES_BINDIR"])
    found = sorted(
        (Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/postgres")),
        key=lambda d: int(d.parent.name) if d.parent.name.isdigit() else 0,
    )
    if found:
        return found[-1]
    on_path = shutil.which("pg_ctl")
    return (
        Path(on_path).resolve().parent
        if on_path and (Path(on_path).resolve().parent / "initdb").exists()
        else None
    )


def install() -> None:
    """Install Debian's postgresql when no server is found: quiet and idempotent (root only)."""
    if find_bindir():
        return
    if os.geteuid() != 0:
        raise PostgresError(
            "No PostgreSQL server found (no /usr/lib/postgresql/*/bin/postgres): install it, "
            "e.g. `sudo apt-get install postgresql`, or set POSTGRES_BINDIR."
        )
    if not shutil.which("apt-get"):
        raise PostgresError(
            "No PostgreSQL server found and no apt-get to install one: set POSTGRES_BINDIR."
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    print("local_postgres: installing Debian's postgresql (apt-get)", file=sys.stderr)
    for cmd in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "postgresql"],
    ):
        result = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise PostgresError(
                f"`{' '.join(cmd)}` failed:\n{(result.stdout + result.stderr)[-3000:]}"
            )
    if not find_bindir():
        raise PostgresError(
            "apt-get installed postgresql but no /usr/lib/postgresql/*/bin/postgres appeared"
        )


@dataclass
class LocalPostgres:
    """One PostgreSQL server on 127.0.0.1:``port`` with its data under ``dir``."""

    dir: Path
    port: int = 15432
    db: str = "airflow"
    user: str = "airflow"
    run_as: str = "postgres"
    # Extra postgresql.conf settings, written at initdb (tests turn fsync off, for one).
    settings: dict = field(default_factory=dict)

    @classmethod
    def from_env(cls) -> LocalPostgres:
        env = os.environ
        return cls(
            dir=Path(env.get("POSTGRES_DIR") or ROOT / ".local" / "postgres").absolute(),
            port=int(env.get("POSTGRES_PORT") or 15432),
            db=env.get("POSTGRES_DB") or "airflow",
            user=env.get("POSTGRES_USER") or "airflow",
            run_as=env.get("POSTGRES_RUN_AS") or "postgres",
        )

    @property
    def data_dir(self) -> Path:
        return self.dir / "data"

    @property
    def log_path(self) -> Path:
        return self.dir / "postgres.log"

    def url(self, db: str | None = None) -> str:
        """The SQLAlchemy URL of ``db`` (default: POSTGRES_DB) for the application role."""
        return f"postgresql+psycopg2://{self.user}:{self._password(self.user)}@{HOST}:{self.port}/{db or self.db}"

    # ---- State ---------------------------------------------------------------------------------
    def running_pid(self) -> int | None:
        """The postmaster's pid if postmaster.pid names a live server of this data folder."""
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return None
        return pid if str(self.data_dir).encode() in cmdline and state not in ("Z", "X") else None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return f"--- {self.log_path}: (missing)\n"
        return f"--- last lines of {self.log_path}\n" + "\n".join(text) + "\n"

    # ---- Start and stop ------------------------------------------------------------------------
    def start(self, timeout: int = START_TIMEOUT_S) -> None:
        """Start the server (initdb first if needed); ensure POSTGRES_USER and POSTGRES_DB exist."""
        for name in (self.db, self.user):
            if not _NAME.match(name):
                raise PostgresError(
                    f"{name!r}: use lower-case letters, digits and _ for POSTGRES_DB and POSTGRES_USER"
                )
        bindir = self._bindir()
        if self.running_pid() is None:
            if _port_open(self.port):
                raise PostgresError(
                    f"{HOST}:{self.port} is taken by another process: choose POSTGRES_PORT"
                )
            if not (self.data_dir / "PG_VERSION").exists():
                self._initdb(bindir)
            result = self._as_owner(
                [
                    bindir / "pg_ctl",
                    "start",
                    "-D",
                    self.data_dir,
                    "-l",
                    self.log_path,
                    "-w",
                    "-t",
                    str(timeout),
                    "-o",
                    f"-p {self.port}",
                ],
            )
            if result.returncode != 0 or self.running_pid() is None:
                self.stop(timeout=10)
                raise PostgresError(
                    f"PostgreSQL did not start:\n{result.stdout}{result.stderr}{self.log_tail()}"
                )
        self.ensure_database(self.db)

    def stop(self, timeout: int = STOP_TIMEOUT_S) -> None:
        """Stop the server: a fast shutdown, else an immediate one, else SIGKILL. Idempotent."""
        pid = self.running_pid()
        if pid is None:
            return
        bindir = self._bindir()
        for mode, wait in (("fast", timeout), ("immediate", 10)):
            self._as_owner(
                [bindir / "pg_ctl", "stop", "-D", self.data_dir, "-m", mode, "-w", "-t", str(wait)]
            )
            if self.running_pid() is None:
                return
        # Every server process calls setsid(), so no process group holds them all: SIGKILL the
        # postmaster's children (backends, background workers), then the postmaster itself.
        print(
            f"local_postgres: no clean stop; SIGKILL to the server (pid {pid}) and its children",
            file=sys.stderr,
        )
        for victim in [*_children(pid), pid]:
            try:
                os.kill(victim, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        end = time.monotonic() + 10
        while self.running_pid() is not None and time.monotonic() < end:
            time.sleep(0.1)

    # ---- SQL -------------------------------------------------------------------------------
    def ensure_database(self, db: str) -> None:
        """Create the application role and ``db`` (owned by it) unless they exist."""
        if not _NAME.match(db):
            raise PostgresError(f"{db!r}: use lower-case letters, digits and _ in a database name")
        password = self._password(self.user)
        self.psql(
            f"SELECT format('CREATE ROLE {self.user} LOGIN PASSWORD %L', '{password}')\n"
            f"WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{self.user}') \\gexec\n"
            f"SELECT 'CREATE DATABASE {db} OWNER {self.user} ENCODING ''UTF8'''\n"
            f"WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '{db}') \\gexec\n"
        )

    def psql(self, script: str, db: str = "postgres") -> str:
        """Run an SQL script as the superuser over TCP; returns its output, raises on an error."""
        result = subprocess.run(
            [
                self._bindir() / "psql",
                "-X",
                "-q",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                HOST,
                "-p",
                str(self.port),
                "-U",
                SUPERUSER,
                "-d",
                db,
                "-f",
                "-",
            ],
            input=script,
            env={**os.environ, "PGPASSWORD": self._password(SUPERUSER), "PGCONNECT_TIMEOUT": "10"},
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise PostgresError(f"psql on {HOST}:{self.port}/{db} failed: {result.stderr.strip()}")
        return result.stdout

    # ---- Helpers -------------------------------------------------------------------------------
    def _bindir(self) -> Path:
        bindir = find_bindir()
        if bindir is None:
            raise PostgresError(
                "No PostgreSQL server found (no /usr/lib/postgresql/*/bin/postgres): run `make postgres-install` "
                "(apt-get install postgresql, as root) or set POSTGRES_BINDIR."
            )
        return bindir

    def _owner(self) -> pwd.struct_passwd | None:
        """Who runs the server: POSTGRES_RUN_AS when we are root, else None (this user)."""
        if os.geteuid() != 0:
            return None
        try:
            return pwd.getpwnam(self.run_as)
        except KeyError:
            raise PostgresError(
                f"PostgreSQL refuses to run as root and there is no user {self.run_as!r} to run it as: "
                "create one (Debian's postgresql package creates `postgres`) or set POSTGRES_RUN_AS."
            ) from None

    def _as_owner(self, cmd: list, **kwargs) -> subprocess.CompletedProcess:
        owner = self._owner()
        ids = (
            {}
            if owner is None
            else {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}
        )
        env = {**os.environ, "HOME": owner.pw_dir if owner else os.environ.get("HOME", "/")}
        return subprocess.run(
            [str(c) for c in cmd],
            cwd=self.dir,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            **ids,
            **kwargs,
        )

    def _chown(self, path: Path) -> None:
        owner = self._owner()
        if owner is not None:
            os.chown(path, owner.pw_uid, owner.pw_gid)

    def _password(self, role: str) -> str:
        """The role's password: read from its file, or made (and kept) on the first call."""
        path = self.dir / f"{role}.password"
        if not path.exists():
            self.dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(
                    secrets.token_urlsafe(24) + "\n"
                )  # URL-safe: it goes into the SQLAlchemy URL
            self._chown(path)
        return path.read_text().strip()

    def _initdb(self, bindir: Path) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dir.chmod(0o700)
        self._chown(self.dir)
        owner = self._owner()
        if owner is not None and self._as_owner(["test", "-w", self.dir]).returncode != 0:
            raise PostgresError(
                f"The server runs as {owner.pw_name}, who cannot reach {self.dir} (a parent folder is not "
                "searchable by others): set POSTGRES_DIR to a folder it can reach, e.g. /var/tmp/ysb-postgres."
            )
        if self.data_dir.exists():  # a leftover of an initdb that did not finish
            shutil.rmtree(self.data_dir)
        self._password(SUPERUSER), self._password(self.user)
        result = self._as_owner(
            [
                bindir / "initdb",
                "-D",
                self.data_dir,
                "-U",
                SUPERUSER,
                f"--pwfile={self.dir / f'{SUPERUSER}.password'}",
                "--auth=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C",
            ],
        )
        if result.returncode != 0:
            raise PostgresError(f"initdb failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
        conf = {
            "listen_addresses": f"'{HOST}'",
            "unix_socket_directories": "''",  # TCP only: no socket in /var/run/postgresql needed
            **self.settings,
        }
        with open(self.data_dir / "postgresql.conf", "a") as f:
            f.write("\n# include/cluster/local_postgres.py\n")
            f.writelines(f"{key} = {value}\n" for key, value in conf.items())


def _children(pid: int) -> list[int]:
    children = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "stat").read_text().rsplit(")", 1)[1].split()[
                1
            ] == str(pid):
                children.append(int(entry.name))
        except (OSError, IndexError):
            pass
    return children


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1):
            return True
    except OSError:
        return False


def main(argv: list[str]) -> int:
    command = argv[1] if len(argv) == 2 else ""
    server = LocalPostgres.from_env()
    try:
        if command == "install":
            install()
        elif command == "start":
            started = time.monotonic()
            server.start()
            print(
                f"local_postgres: up on {HOST}:{server.port} ({time.monotonic() - started:.0f} s), "
                f"database {server.db} owned by {server.user}, data in {server.data_dir}"
            )
        elif command == "stop":
            server.stop()
            print("local_postgres: stopped")
        elif command == "status":
            pid = server.running_pid()
            if pid is None:
                print("local_postgres: not running")
                return 3
            print(
                f"local_postgres: running (pid {pid}) on {HOST}:{server.port}, data in {server.data_dir}"
            )
        elif command == "url":
            if not (server.dir / f"{server.user}.password").exists():
                raise PostgresError("No password yet: run `make postgres-start` first.")
            print(server.url())
        else:
            print(__doc__.split("\n\n")[1], file=sys.stderr)
            return 2
    except PostgresError as error:
        print(f"local_postgres: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
