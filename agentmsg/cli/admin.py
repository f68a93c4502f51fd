"""Install, uninstall, doctor and version: about this copy of agentmsg, not about messages."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from agentmsg import PACKAGE_DIR
from agentmsg.errors import UsageError
from agentmsg.service.context import Ctx

Payload = dict[str, Any]


def version(ctx: Ctx) -> Payload:
    """What ``doctor`` compares across entry points: a stale copy shows up here."""
    from agentmsg import TOOL, __version__

    return {"version": __version__, "tool": TOOL, "python": sys.executable,
            "package": str(Path(PACKAGE_DIR).resolve()), "root": str(ctx.root), "root_source": ctx.root_source,
            "store": ctx.store.describe()}


def doctor(ctx: Ctx) -> Payload:
    """Every entry point's version, interpreter and root; disagreement is an error (exit 16)."""
    from agentmsg.cli import doctor as checks
    from agentmsg.errors import Disagreement

    # Probes get this environment unchanged: the question is which root each
    # entry point resolves on its own, not whether it can be told one.
    payload = checks.run(ctx.env, str(ctx.root))
    payload["store"] = ctx.store.describe()
    if not payload["store"].get("reachable", True):
        payload["warnings"].append(f"the {payload['store']['store']} store at {payload['store']['location']} "
                                   f"cannot be reached: {payload['store'].get('problem', 'unknown reason')}")
        payload["verdict"] = "error"
    elif payload["store"].get("schema_known") not in (None, payload["store"].get("schema")):
        have, know = payload["store"].get("schema"), payload["store"]["schema_known"]
        payload["warnings"].append(f"the database schema is version {have or 'none'}, this client's is {know}: "
                                   + ("upgrade agentmsg" if have and have > know else "run `agentmsg db migrate`"))
        payload["verdict"] = "error"
    if payload["warnings"]:
        err = Disagreement(f"{len(payload['warnings'])} warning(s); first: {payload['warnings'][0]}")
        err.result = payload
        raise err
    return payload


def _pg(ctx: Ctx, what: str) -> Any:
    """The PostgreSQL store the command names, or a usage error saying how to name one."""
    if not ctx.store_url:
        raise UsageError(f"{what} needs a database: pass --store postgresql://... or set AGENTMSG_STORE")
    from agentmsg.backends.postgres.store import PgStore

    store = ctx.store
    if not isinstance(store, PgStore):
        raise UsageError(f"{what} needs a postgresql:// store")
    return store


def db_migrate(ctx: Ctx) -> Payload:
    """Bring the database's schema up to this copy's migrations (one transaction, under an advisory lock)."""
    from agentmsg.backends.postgres import schema
    from agentmsg.backends.postgres.store import db_errors, safe_location

    store = _pg(ctx, "db migrate")
    conn = store.connect(checked=False)
    try:
        with db_errors("migrate"):
            done = schema.migrate(conn)
    finally:
        conn.close()
    return {**done, "store": safe_location(store.url)}


def db_grant(ctx: Ctx, collab: str, role: str) -> Payload:
    """Let another PostgreSQL role into a collaboration, so its sessions can join it."""
    cid = ctx.named(collab)
    if not role.replace("_", "").isalnum() or len(role) > 63:
        raise UsageError(f"invalid role name {role[:70]!r}")
    added = _pg(ctx, "db grant").grant(cid, role)
    return {"collab": cid, "role": role, "already": not added}


def db_move(ctx: Ctx, collab: str) -> Payload:
    """Move a collaboration from the file store at the state root into the --store database."""
    from agentmsg.backends.file.store import FileStore
    from agentmsg.service import collabs
    from agentmsg.service.move import move

    target = _pg(ctx, "db move")
    from agentmsg.runtime import doorbell

    source = FileStore(ctx.root, on_wake=doorbell.nudge)
    return move(source, target, collabs.resolve(source, collab))
