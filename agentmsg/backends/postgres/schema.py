"""Numbered SQL migrations shipped in the package, applied in one transaction under an advisory lock.

``agentmsg_migrations`` records each applied version.  A client checks it
on connecting: a schema newer than it knows is refused (it may not write
what an older client cannot read back), and one older than it needs asks
for ``agentmsg db migrate``.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

from agentmsg.errors import SchemaMismatch

#: ``pg_advisory_xact_lock`` key: "agentmsg" in ASCII, so two migrators never interleave.
MIGRATE_LOCK = 0x6167656E746D7367

_NAME = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")


def migrations() -> list[tuple[int, str, str]]:
    """(version, file name, SQL) of every shipped migration, in order."""
    found = []
    for entry in resources.files(__package__).joinpath("migrations").iterdir():
        m = _NAME.match(entry.name)
        if m:
            found.append((int(m.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    return sorted(found)


def known_version() -> int:
    return migrations()[-1][0]


def current_version(conn: Any) -> int | None:
    """The database's schema version, or None when agentmsg was never migrated there."""
    row = conn.execute("SELECT to_regclass('agentmsg_migrations') IS NOT NULL").fetchone()
    if not row[0]:
        return None
    row = conn.execute("SELECT max(version) FROM agentmsg_migrations").fetchone()
    return int(row[0]) if row[0] is not None else None


def check(conn: Any) -> int:
    """The schema version, if this client may use it; else SchemaMismatch with the one-line reason."""
    have, know = current_version(conn), known_version()
    if have is None:
        raise SchemaMismatch("no agentmsg schema in this database; run `agentmsg db migrate --store URL`")
    if have > know:
        raise SchemaMismatch(f"the database schema is version {have}, newer than this client knows ({know}); "
                             "upgrade agentmsg before writing here")
    if have < know:
        raise SchemaMismatch(f"the database schema is version {have}, older than this client needs ({know}); "
                             "run `agentmsg db migrate --store URL`")
    return have


def migrate(conn: Any) -> dict[str, Any]:
    """Apply every shipped migration the database lacks, all in one transaction; returns what was done."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS agentmsg_migrations (version integer PRIMARY KEY, "
                     "name text NOT NULL, applied timestamptz NOT NULL DEFAULT now())")
        have = current_version(conn) or 0
        if have > known_version():
            raise SchemaMismatch(f"the database schema is version {have}, newer than this client knows "
                                 f"({known_version()}); upgrade agentmsg")
        applied = []
        for version, name, sql in migrations():
            if version > have:
                conn.execute(sql)
                conn.execute("INSERT INTO agentmsg_migrations (version, name) VALUES (%s, %s)", (version, name))
                applied.append(name)
    return {"from": have, "to": max(have, known_version()), "applied": applied}
