"""``agentmsg claim``, ``release`` and ``claims`` (docs/CLAIMS.md): arguments -> service/claims.py -> output."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from agentmsg.cli.options import Collab, Json, Root, Self, _ctx, _done

Patterns = Annotated[list[str] | None, typer.Argument(
    metavar="PATHSPEC...", help="Paths or globs (gitignore-style: *, ?, [..], ** for any depth; a directory covers "
                                "what is beneath it), relative to the current directory, inside one git repository.")]


def _service() -> Any:
    from agentmsg.service import claims

    return claims


def claim(
    patterns: Patterns = None,
    shared: Annotated[bool, typer.Option("--shared", help="A shared claim: conflicts only with an exclusive one "
                                                          "(default: exclusive, conflicts with any).")] = False,
    ttl: Annotated[str | None, typer.Option("--ttl", help="How long it holds (default 30m, at most 24h); nothing "
                                                          "renews it on its own.")] = None,
    reason: Annotated[str | None, typer.Option("--reason", help="Why, shown to whoever is refused.")] = None,
    renew: Annotated[bool, typer.Option("--renew", help="Extend your live claims (those named, or all in this "
                                                        "repository) by --ttl from now.")] = False,
    collab: Collab = None,
    self_: Self = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Reserve paths of this repository; a conflicting claim exits 5 naming its holder."""
    return _done("claim", _service().claim(_ctx(root), collab=collab, self_flag=self_, patterns=list(patterns or []),
                                          shared=shared, ttl=ttl, reason=reason, renew=renew), json_)


def release(
    patterns: Patterns = None,
    all_: Annotated[bool, typer.Option("--all", help="Release every claim you hold in the collaboration.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Release another participant's claim (a human: pin only; "
                                                        "recorded).")] = False,
    holder: Annotated[str | None, typer.Option("--holder", help="With --force: whose claims (default: whoever "
                                                                "holds the named patterns).")] = None,
    collab: Collab = None,
    self_: Self = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """Release claims; releasing another participant's claim exits 9."""
    return _done("release", _service().release(_ctx(root), collab=collab, self_flag=self_,
                                              patterns=list(patterns or []), all_=all_, force=force, holder=holder),
                 json_)


def claims(
    mine: Annotated[bool, typer.Option("--mine", help="Only your own claims.")] = False,
    collab: Collab = None,
    self_: Self = None,
    root: Root = None,
    json_: Json = False,
) -> int:
    """List the collaboration's live claims: holder, pattern, mode, reason, until when."""
    return _done("claims", _service().listing(_ctx(root), collab=collab, self_flag=self_, mine=mine), json_)


COMMANDS: dict[str, Callable[..., int]] = {"claim": claim, "release": release, "claims": claims}


def _guard() -> Any:
    from agentmsg.service import guard

    return guard


def guard_install(json_: Json = False) -> int:
    """Add pre-commit and pre-push hooks to this repository that refuse what another participant holds."""
    return _done("guard install", _guard().install(), json_)


def guard_uninstall(json_: Json = False) -> int:
    """Remove agentmsg's git hooks from this repository (a hook they chained is put back)."""
    return _done("guard uninstall", _guard().uninstall(), json_)


def guard_check(
    hook: Annotated[str, typer.Argument(metavar="pre-commit|pre-push", help="Which git hook is asking.")],
    root: Root = None,
    json_: Json = False,
) -> int:
    """What the installed hooks run: exit 5 naming the holder when a commit or push touches a claimed path."""
    import sys

    stdin = sys.stdin.read() if hook == "pre-push" and not sys.stdin.isatty() else ""
    return _done("guard check", _guard().check(_ctx(root), hook, stdin), json_)


GUARD: dict[str, Callable[..., int]] = {"install": guard_install, "uninstall": guard_uninstall,
                                        "check": guard_check}
