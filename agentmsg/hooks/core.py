"""``Hook``: every event of the hooks in one object (each event's code is its own module)."""

from __future__ import annotations

from agentmsg.hooks.midturn import MidTurnEvent
from agentmsg.hooks.render_ahead import RenderAhead
from agentmsg.hooks.session_start import SessionStartEvent
from agentmsg.hooks.stop import StopEvent


class Hook(SessionStartEvent, MidTurnEvent, StopEvent, RenderAhead):
    """One hook run (or the renderer's stand-in for one); UserPromptSubmit comes with ``RenderAhead``."""
