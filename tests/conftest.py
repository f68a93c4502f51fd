"""Shared fixtures.

Every test runs with ``HOME`` pointing at a per-test temporary directory and
without any of the variables that pick a state root or an identity, so no
test can read or write the real ``~/.local/state/agentmsg`` or pick up the
session of the agent that happens to run the suite.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.pins import CAROL_PIN, DRIVER_PIN, REVIEWER_PIN

REPO_ROOT = Path(__file__).resolve().parents[1]

# The package is importable without `pip install -e .` (the README's test
# command installs it; a bare `pytest` from a checkout should work too).
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

ISOLATED_VARS = (
    "AGENTMSG_HOME",
    "XDG_STATE_HOME",
    "CLAUDE_CODE_SESSION_ID",
    "CODEX_THREAD_ID",
    "CODEX_SESSION_ID",
    "COPILOT_AGENT_SESSION_ID",
    "OPENCODE_SESSION_ID",
)


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A throwaway HOME, no state-root or identity variables from the caller."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for name in ISOLATED_VARS:
        monkeypatch.delenv(name, raising=False)
    for name in list(os.environ):
        if name.startswith("AGENTMSG_"):
            monkeypatch.delenv(name, raising=False)
    # A command run in-process starts the root's resident helper for the next one (agentmsg/cli/serve.py):
    # not for every test root; tests/cli/test_thin.py turns it on.
    monkeypatch.setenv("AGENTMSG_NO_HELPER", "1")
    return home


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A state root that does not exist yet (the store creates it 0700)."""
    return tmp_path / "state"


@pytest.fixture
def store(root: Path):
    from tests.support.facade import FileStore

    return FileStore(root)


@dataclass(frozen=True)
class Collab:
    """An open collaboration with three participants."""

    id: str
    root: Path
    driver: object  # agentmsg.values.Pin
    reviewer: object
    carol: object

    @property
    def pins(self) -> dict[str, object]:
        return {"driver": self.driver, "reviewer": self.reviewer, "carol": self.carol}

    @property
    def dir(self) -> Path:
        return self.root / "collabs" / self.id




@pytest.fixture
def collab(store) -> Collab:
    """driver (codex) opened it; reviewer (claude-code) and carol (human) joined."""
    from agentmsg.domain import validate as model

    driver, reviewer, carol = model.pin(DRIVER_PIN), model.pin(REVIEWER_PIN), model.pin(CAROL_PIN)
    reg = store.open(driver, "driver", "review", "review the store", {"adapter": "hook"})
    store.join(reg.collab, reviewer, "reviewer")
    store.join(reg.collab, carol, "carol")
    return Collab(reg.collab, store.root, driver, reviewer, carol)


@pytest.fixture
def child_env(_isolated_home: Path) -> dict[str, str]:
    """Environment for child Python processes: isolated HOME, this checkout on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


@pytest.fixture(scope="session")
def pg_cluster():
    """One throwaway PostgreSQL server for the whole session (tests/support/pg.py); stopped and removed at the end."""
    from tests.support.pg import Cluster

    cluster = Cluster().init().start()
    try:
        cluster.make_template()
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def pg_url(pg_cluster) -> str:
    """A fresh, migrated database on the session's server."""
    return pg_cluster.url(pg_cluster.new_db())


@pytest.fixture(params=["file", "memory", "postgresql"])
def port(request: pytest.FixtureRequest, tmp_path: Path):
    """Each storage backend in turn: a test using it is part of the backend contract."""
    from agentmsg.backends.file.store import FileStore
    from agentmsg.backends.memory import MemoryStore

    if request.param == "postgresql":
        from agentmsg.backends.postgres.store import PgStore

        store = PgStore(request.getfixturevalue("pg_url"))
        yield store
        store.close()
        return
    yield FileStore(tmp_path / "state") if request.param == "file" else MemoryStore()


@pytest.fixture
def box(port):
    """The service over ``port``."""
    from agentmsg.service.messaging import Mailbox

    return Mailbox(port)


# ---- parallel runs (scripts/test: pytest-xdist, --dist loadgroup) ---------------------------------------------

#: The files that drive real host CLIs run in two lanes, each file after the other within its lane: at most two
#: hosts (node processes, tmux sessions) load the machine's two cores at once, beside the unit tests, so no host's
#: own timeout (a hook's, a turn's) is outrun by the load.  Lane "hosts-a" holds these; every other e2e file is
#: in lane "hosts-b" (the two split the lanes' measured time about evenly).
HOSTS_A = frozenset(("test_e2e_opencode.py", "test_e2e_spawn_hosts.py", "test_e2e_ring.py", "test_e2e_newcomer.py",
                     "test_e2e_spawn.py", "test_e2e_collisions.py", "test_e2e_mirror.py", "test_e2e_handoffs.py",
                     "test_first_use_words.py"))


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test file is one group (its module set-up made once, as --dist loadfile would); the real-host
    files are two groups (above)."""
    for item in items:
        path = Path(str(item.path))
        if path.parent.name == "e2e":
            group = "hosts-a" if path.name in HOSTS_A else "hosts-b"
        else:
            group = f"{path.parent.name}/{path.name}"
        item.add_marker(pytest.mark.xdist_group(group))
