"""A throwaway PostgreSQL cluster from Debian's packages, for the tests and ``bench/pg_bench.py``.

``initdb`` and ``pg_ctl`` run as the ``postgres`` user when we are root (the
server refuses to run as root), in a fresh temporary folder; the server
listens on a unix socket in that folder only (``listen_addresses=''``).
Nothing skips: no PostgreSQL binaries is an error naming the package.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Any

#: A migrated, empty database every test database is copied from.
TEMPLATE = "agentmsg_template"


def pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    path = found[-1] if found else shutil.which(name)
    if not path:
        raise RuntimeError(f"PostgreSQL's {name} not found: apt-get install -y postgresql (scripts/bootstrap does)")
    return path


class Cluster:
    """One server in ``folder``; ``url(db, user)`` names a database on it."""

    def __init__(self, folder: str | None = None, *, fsync: bool = False) -> None:
        self.dir = Path(folder or tempfile.mkdtemp(prefix="agentmsg-pg-"))
        self.data = self.dir / "data"
        self.socket = self.dir
        self.fsync = fsync
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            pg = pwd.getpwnam("postgres")
            os.chown(self.dir, pg.pw_uid, pg.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self.superuser = "postgres" if self.as_user else pwd.getpwuid(os.geteuid()).pw_name

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.as_user, *argv], capture_output=True, text=True, check=check, timeout=120,
                              stdin=subprocess.DEVNULL)

    def init(self) -> Cluster:
        self._run(pg_bin("initdb"), "-D", str(self.data), "-U", self.superuser, "--auth=trust", "-E", "UTF8",
                  "--locale=C", "--no-instructions")
        return self

    def start(self) -> Cluster:
        opts = f"-c listen_addresses='' -c unix_socket_directories={self.socket} -c max_connections=100"
        if not self.fsync:
            opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        done = self._run(pg_bin("pg_ctl"), "-D", str(self.data), "-o", opts, "-l", str(self.dir / "server.log"),
                         "-w", "-t", "60", "start", check=False)
        if done.returncode != 0:
            log = (self.dir / "server.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"pg_ctl start failed: {done.stdout}{done.stderr}\n{log}")
        return self

    def stop(self, mode: str = "fast") -> None:
        self._run(pg_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop", check=False)

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, db: str = "postgres", user: str | None = None) -> str:
        return f"postgresql:///{db}?host={self.socket}&user={user or self.superuser}"

    def sql(self, statement: str, db: str = "postgres", params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.url(db), autocommit=True) as conn:
            cur = conn.execute(statement, params)  # type: ignore[arg-type]
            return cur.fetchall() if cur.description else []

    def make_template(self) -> None:
        """A migrated database (through the real ``migrate``) that ``new_db`` copies."""
        from agentmsg.backends.postgres import schema
        from agentmsg.backends.postgres.store import PgStore

        self.sql(f"CREATE DATABASE {TEMPLATE}")
        conn = PgStore(self.url(TEMPLATE)).connect(checked=False)
        try:
            schema.migrate(conn)
        finally:
            conn.close()

    def new_db(self, *, migrated: bool = True) -> str:
        """A fresh database (migrated, copied from the template, unless told not to); returns its name."""
        name = "t_" + uuid.uuid4().hex[:16]
        self.sql(f"CREATE DATABASE {name}" + (f" TEMPLATE {TEMPLATE}" if migrated else ""))
        return name

    def add_role(self, name: str) -> str:
        """A login role that is a member of ``agentmsg_client`` (what docs/POSTGRES.md has an admin do)."""
        self.sql(f"CREATE ROLE {name} LOGIN IN ROLE agentmsg_client")
        return name
