"""agentmsg/pathops.py: ``os.path``'s meaning, on ``posix`` alone (the pre-tool hook imports no ``os``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmsg import pathops
from tests.support.cli_helpers import REPO_ROOT

PARTS = st.sampled_from(["", ".", "..", "a", "b", "src", "x.py", "a b", "..a", "...", "é"])
PATHS = st.builds(lambda lead, parts, tail: lead + "/".join(parts) + tail,
                  st.sampled_from(["", "/", "//", "///", "./", "../"]), st.lists(PARTS, max_size=6),
                  st.sampled_from(["", "/", "//", "/."]))


@settings(max_examples=400, deadline=None)
@given(PATHS, PATHS)
def test_the_string_operations_match_os_path(a: str, b: str) -> None:
    assert pathops.normpath(a) == os.path.normpath(a)
    assert pathops.dirname(a) == os.path.dirname(a)
    assert pathops.basename(a) == os.path.basename(a)
    assert pathops.split(a) == os.path.split(a)
    assert pathops.join(a, b) == os.path.join(a, b)
    assert pathops.join(a, b, a) == os.path.join(a, b, a)
    assert pathops.abspath(a) == os.path.abspath(a)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folders, files and links of every kind: relative, absolute, chained, dangling, to a folder, a loop."""
    top = tmp_path_factory.mktemp("tree")
    (top / "repo" / "src" / "deep").mkdir(parents=True)
    (top / "repo" / "src" / "retry.py").write_text("x")
    links = {"repo/lnk": "src", "repo/abs": str(top / "repo" / "src"), "repo/alias.py": "src/retry.py",
             "repo/chain": "lnk", "repo/dangling": "nowhere/x", "repo/up": "..", "repo/loop1": "loop2",
             "repo/loop2": "loop1", "repo/src/deep/back": "../../lnk/retry.py", "repo/self": "self"}
    for name, target in links.items():
        (top / name).symlink_to(target)
    return top


NAMES = ["repo", "repo/src", "repo/src/retry.py", "repo/lnk", "repo/lnk/retry.py", "repo/abs/retry.py",
         "repo/alias.py", "repo/chain/deep/back", "repo/dangling", "repo/dangling/more", "repo/up/repo/lnk",
         "repo/loop1", "repo/loop1/x", "repo/self/x", "repo/missing/new.py", "repo/lnk/../alias.py",
         "repo/src/deep/back/x", "repo//src/./retry.py"]


@pytest.mark.parametrize("name", NAMES)
def test_realpath_and_the_file_tests_match_os_path_on_links(tree: Path, name: str) -> None:
    path = f"{tree}/{name}"
    assert pathops.realpath(path) == os.path.realpath(path)
    assert (pathops.isdir(path), pathops.isfile(path), pathops.islink(path)) == (
        os.path.isdir(path), os.path.isfile(path), os.path.islink(path))


def test_relative_paths_resolve_from_the_cwd(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tree / "repo")
    for name in ("lnk/retry.py", "alias.py", "../repo/chain", ".", "dangling"):
        assert pathops.realpath(name) == os.path.realpath(name)
        assert pathops.abspath(name) == os.path.abspath(name)


def test_the_pre_tool_hooks_modules_import_no_os() -> None:
    """What the pre-tool hook imports, refusing or not, leaves ``os`` (and ``_collections_abc``) out."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "from agentmsg.hooks import pretool, start; from agentmsg.hosts import registry; "
            "from agentmsg.text import boundary; registry.get_or_nothing('claude').refusal('x'); "
            "boundary.peer_fields([('claim', 'src')], [], 'bob'); pretool.targets('Bash', {'command': 'rm x'}); "
            "print(sorted(m for m in ('os', 'posixpath', '_collections_abc') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(REPO_ROOT)], capture_output=True,
                          text=True, check=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr
