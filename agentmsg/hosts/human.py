"""A person at a terminal: ``human:NAME`` pins, no hooks, no session variable, no wake-up."""

from __future__ import annotations

from agentmsg.hosts.base import Host


class Human(Host):
    name = runtime = "human"
    title = "a person"


HOST = Human()
