"""The three participants' pins the fixtures (conftest's ``collab``) and the tests agree on."""

from __future__ import annotations

DRIVER_PIN = "codex:0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
REVIEWER_PIN = "claude-code:5418c0de-1111-4222-8333-944455556666"
CAROL_PIN = "human:carol"
