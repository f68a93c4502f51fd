"""Child process for the PostgreSQL contention and SIGKILL tests (not collected by pytest).

    pg_writer.py URL COLLAB PIN PREFIX COUNT
        send COUNT messages to ``reviewer`` with the ids ``message_id(PREFIX, i)`` for i in 0 .. COUNT-1 through
        ``Mailbox.send`` over ``PgStore`` (the combining path), printing, flushed,
        ``TRY <id>`` before each attempt and ``STORED <id> <seq>`` right after it returns;
        a send that fails with StoreUnreachable (its connection was terminated) prints
        ``FAILED <id>`` and is tried again with the same id, as a user would retry it.
"""

from __future__ import annotations

import sys
import uuid

from agentmsg.backends.postgres.store import PgStore
from agentmsg.domain import validate
from agentmsg.domain.values import Draft
from agentmsg.errors import StoreUnreachable
from agentmsg.service.messaging import Mailbox


def message_id(prefix: str, i: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"agentmsg-test/{prefix}/{i}"))


def main(url: str, collab: str, pin: str, prefix: str, count: str) -> None:
    box = Mailbox(PgStore(url))
    who = validate.pin(pin)
    print("READY", flush=True)
    for i in range(int(count)):
        mid = message_id(prefix, i)
        while True:
            print(f"TRY {mid}", flush=True)
            try:
                (sent,) = box.send(collab, who, Draft(to="reviewer", subject="k", body=f"{prefix} {i}", id=mid))
            except StoreUnreachable:
                print(f"FAILED {mid}", flush=True)
                continue
            print(f"STORED {mid} {sent.message.seq}", flush=True)
            break
    print("DONE", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
