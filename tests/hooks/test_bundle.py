"""The hook bundle (agentmsg/hooks/bundle.py): one file of compiled modules, used only while it matches.

Each test works on a copy of the plugin (``agentmsg/`` and ``hooks/``, no ``__pycache__``), so it can
edit sources and damage the bundle without touching the checkout's.
"""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
from importlib.util import MAGIC_NUMBER
from pathlib import Path

import pytest

from tests.support.facade import Draft
from tests.support.helpers_hooks import REPO, REVIEWER_SESSION, log_lines, run_hook

# One hook process's imports, then what served each module: "bundle" or "path".
PROBE = """
import sys
sys.path.insert(0, sys.argv[1])
from agentmsg.hooks import bundle
finder = bundle.load(sys.argv[1])
import agentmsg.hooks.entry, agentmsg.hooks.prompt, json, importlib
for extra in sys.argv[2:]:
    importlib.import_module(extra)
served = {n: ("bundle" if m.__spec__.loader is finder else "path") for n, m in list(sys.modules.items())
          if n not in finder.before and getattr(m.__spec__, "origin", "").endswith(".py")}
print(json.dumps({"served": served, "probe": getattr(agentmsg.hooks.prompt, "BUNDLE_PROBE", None)}))
bundle.save(finder)
"""


@pytest.fixture
def plugin(tmp_path: Path) -> Path:
    copy = tmp_path / "plugin"
    for part in ("agentmsg", "hooks"):
        shutil.copytree(REPO / part, copy / part, ignore=shutil.ignore_patterns("__pycache__", "_plugin"))
    return copy


def probe(plugin: Path, *extra: str) -> dict:
    out = subprocess.run([sys.executable, "-I", "-S", "-c", PROBE, str(plugin), *extra], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stderr == ""
    return json.loads(out.stdout)


def bundle_file(plugin: Path) -> Path:
    (path,) = (plugin / "agentmsg" / "__pycache__").glob("hooks.*.bundle")
    return path


def served(result: dict, how: str) -> set[str]:
    return {name for name, by in result["served"].items() if by == how}


def test_the_second_process_imports_every_module_from_the_bundle(plugin):
    first = probe(plugin)
    assert served(first, "bundle") == set()
    assert {"agentmsg.hooks.entry", "agentmsg.hooks.prompt", "json.decoder"} <= served(first, "path")
    assert stat.S_IMODE(bundle_file(plugin).stat().st_mode) == 0o600
    second = probe(plugin)
    assert served(second, "path") == set()
    assert served(second, "bundle") == set(first["served"])  # agentmsg's modules and the standard library's


def test_one_bundle_holds_what_every_hook_process_imported(plugin):
    probe(plugin)
    stop = probe(plugin, "agentmsg.hooks.stop")  # another event's module: imported the ordinary way, then kept
    assert stop["served"]["agentmsg.hooks.stop"] == "path"
    assert served(probe(plugin), "path") == set()  # the prompt's process: its modules are all still there
    assert served(probe(plugin, "agentmsg.hooks.stop"), "path") == set()


def test_a_changed_source_is_imported_from_the_source_and_the_bundle_renewed(plugin):
    probe(plugin)
    source = plugin / "agentmsg" / "hooks" / "prompt.py"
    source.write_text(source.read_text() + "\nBUNDLE_PROBE = 'edited'\n")
    edited = probe(plugin)
    assert edited["probe"] == "edited"
    assert edited["served"]["agentmsg.hooks.prompt"] == "path"
    assert edited["served"]["agentmsg.hooks.entry"] == "bundle"  # the others still come from the bundle
    again = probe(plugin)
    assert again["probe"] == "edited"
    assert served(again, "path") == set()


@pytest.mark.parametrize("damage", ["group-writable", "garbage", "other-python", "truncated"])
def test_a_damaged_or_unsafe_bundle_is_ignored_and_replaced(plugin, damage):
    probe(plugin)
    path = bundle_file(plugin)
    if damage == "group-writable":
        path.chmod(0o620)
    elif damage == "garbage":
        path.write_bytes(b"not a bundle at all")
    elif damage == "other-python":
        path.write_bytes(path.read_bytes().replace(MAGIC_NUMBER, b"\x00\x0d\x0d\x0a", 1))
    else:
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    ignored = probe(plugin)
    assert served(ignored, "bundle") == set()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert served(probe(plugin), "path") == set()


def test_a_module_whose_code_does_not_read_is_imported_from_its_source(plugin):
    from agentmsg.hooks import bundle

    probe(plugin)
    path = bundle_file(plugin)
    head = bundle.header(str(plugin))
    index, code = bundle.unpack(path.read_bytes(), head)
    assert code is not None and "agentmsg.hooks.prompt" in index
    modules = {name: (*entry[:4], code.read(entry[4], entry[5])) for name, entry in index.items()}
    modules["agentmsg.hooks.prompt"] = (*modules["agentmsg.hooks.prompt"][:4], b"\xff not code")
    path.write_bytes(bundle.pack(head, modules))
    damaged = probe(plugin)
    assert damaged["served"]["agentmsg.hooks.prompt"] == "path"
    assert damaged["served"]["agentmsg.hooks.entry"] == "bundle"
    assert served(probe(plugin), "path") == set()


def test_a_bundle_copied_with_the_checkout_is_not_used_by_the_copy(plugin, tmp_path):
    """A host that copies the plugin folder (with its __pycache__) must run the copy's code, not the original's."""
    probe(plugin)
    copy = tmp_path / "copy"
    shutil.copytree(plugin, copy)
    prompt = copy / "agentmsg" / "hooks" / "prompt.py"
    prompt.write_text(prompt.read_text() + "\nBUNDLE_PROBE = 'the copy'\n")
    in_copy = probe(copy)
    assert in_copy["probe"] == "the copy"
    assert served(in_copy, "bundle") == set()
    assert served(probe(copy), "path") == set()  # the copy's own bundle, from then on
    assert probe(plugin)["probe"] is None  # and the original's is untouched


def test_a_symlinked_bundle_is_neither_followed_nor_written_through(plugin, tmp_path):
    probe(plugin)
    path = bundle_file(plugin)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(elsewhere)
    before = elsewhere.read_bytes()
    assert served(probe(plugin), "bundle") == set()
    assert not path.is_symlink()  # replaced by a file of its own
    assert elsewhere.read_bytes() == before
    assert served(probe(plugin), "path") == set()


def test_the_prompt_hook_delivers_the_same_with_and_without_a_bundle(plugin, tmp_path, store, collab):
    env = {"CLAUDE_PLUGIN_ROOT": str(plugin)}
    bundles = plugin / "agentmsg" / "__pycache__"
    shown = []
    for n in range(3):
        store.send(collab.id, collab.driver, Draft(to="reviewer", kind="request", subject=f"patch {n}", body="b"))
        res = run_hook("claude", "UserPromptSubmit", tmp_path, collab.root, REVIEWER_SESSION, extra_env=env)
        assert res.returncode == 0 and res.stderr == ""
        shown.append(json.loads(res.stdout)["hookSpecificOutput"]["additionalContext"])
        assert [p.name for p in bundles.glob("hooks.*.bundle")], "the first run wrote a bundle"
    for n, text in enumerate(shown):
        assert f"patch {n}" in text
    assert log_lines(collab.root) == []


def test_a_bundle_that_cannot_be_written_costs_nothing_but_speed(plugin, tmp_path, store, collab):
    blocked = plugin / "agentmsg" / "__pycache__"
    blocked.write_text("a file where the cache folder would be: nothing can be written below it\n")
    for n in range(2):
        store.send(collab.id, collab.driver, Draft(to="reviewer", kind="request", subject=f"patch {n}", body="b"))
        res = run_hook("claude", "UserPromptSubmit", tmp_path, collab.root, REVIEWER_SESSION,
                       extra_env={"CLAUDE_PLUGIN_ROOT": str(plugin)})
        assert f"patch {n}" in json.loads(res.stdout)["hookSpecificOutput"]["additionalContext"]
        assert res.stderr == ""
    assert blocked.is_file()
    assert log_lines(collab.root) == []


def test_the_hook_script_loads_the_bundle_module_from_its_own_pyc_only_while_it_matches(plugin, tmp_path):
    """hooks/agentmsg_hook.py execs agentmsg/hooks/bundle.py's .pyc itself (no path search for it and its two
    packages), checked against the source as the import system checks it; a changed source is imported anew."""
    script = plugin / "hooks" / "agentmsg_hook.py"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "AGENTMSG_HOME": str(tmp_path / "state")}

    def imported() -> list[str]:
        done = subprocess.run([sys.executable, "-X", "importtime", "-I", "-S", str(script), "claude"], input=b"{}",
                              capture_output=True, env=env, check=True, timeout=60)
        assert done.stdout == b""
        return [line.rsplit("|", 1)[-1].strip() for line in done.stderr.decode().splitlines()]

    assert "agentmsg.hooks.bundle" in imported()  # the first run: no .pyc yet, the ordinary import writes it
    again = imported()
    assert "agentmsg.hooks.bundle" not in again and "agentmsg.hooks" in again  # its package: after the finder
    source = plugin / "agentmsg" / "hooks" / "bundle.py"
    source.write_text(source.read_text() + "\n# edited\n")
    assert "agentmsg.hooks.bundle" in imported()  # the .pyc no longer matches: imported the ordinary way


def test_a_hook_whose_code_cannot_load_exits_0_silently_and_says_so_in_the_log(plugin, tmp_path):
    """hooks/agentmsg_hook.py -> hooks/start.py: a module that fails to import (a broken checkout) costs the host
    nothing (exit 0, no output) and leaves one line in hooks.log; a start.py that cannot load at all, nothing."""
    state = tmp_path / "state"
    state.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "AGENTMSG_HOME": str(state)}
    script = plugin / "hooks" / "agentmsg_hook.py"
    (plugin / "agentmsg" / "hooks" / "entry.py").write_text("raise ImportError('a broken checkout')\n")

    def hook() -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([sys.executable, "-I", "-S", str(script), "claude"], input=b"{}", capture_output=True,
                              env=env, timeout=60)

    for _ in range(2):  # start.py imported the ordinary way, then from its own .pyc
        done = hook()
        assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    lines = (state / "hooks.log").read_text().splitlines()
    assert len(lines) == 2 and all("cannot load agentmsg" in x and "a broken checkout" in x for x in lines)
    (plugin / "agentmsg" / "hooks" / "start.py").write_text("def main(:\n")
    done = hook()
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
