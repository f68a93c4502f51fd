"""What every command shares: the common options, the context a command runs in, and its output.

Kept apart from ``cli.app`` so that the per-host commands (``cli.hostcmds``) use the same ones.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from agentmsg.hosts import registry

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agentmsg.service.context import Ctx

Json = Annotated[bool, typer.Option("--json", help="Print one JSON envelope on stdout.")]
Root = Annotated[str | None, typer.Option("--root", help="State root (else AGENTMSG_HOME, "
                                                        "XDG_STATE_HOME/agentmsg, ~/.local/state/agentmsg).")]
Self = Annotated[str | None, typer.Option("--self", help="Acting session pin RUNTIME:SESSION_ID (default: from "
                                                         + " / ".join(v for v, _ in registry.shell_vars()) + ").")]
Notify = Annotated[str | None, typer.Option(help="How a sender rings you when mail arrives: hook (default: "
                                                 "your hooks show it at your next prompt), tmux (this pane) or "
                                                 + " or ".join(f"{a} (this {h.title} thread)"
                                                               for a, h in registry.notify_adapters().items())
                                                 + ".")]
NotifyCommand = Annotated[str | None, typer.Option(hidden=True, help="Refused: registry commands never run.")]
Collab = Annotated[str | None, typer.Option("--collab", help="Collaboration: its id, its label or an id prefix of "
                                                             "8+ characters (default: AGENTMSG_COLLAB, or your only "
                                                             "binding; agentmsg collabs lists them).")]


def _done(command: str, payload: dict[str, Any], as_json: bool) -> int:
    from agentmsg.cli import output

    return output.emit(command, payload, as_json)


def _ctx(root: str | None) -> Ctx:
    from agentmsg.service.context import Ctx

    return Ctx.create(root)
