"""The hook process's entry, after hooks/agentmsg_hook.py found the plugin root: each mode's code, and the
bundle of compiled modules (agentmsg/hooks/bundle.py) for the hooks.

hooks/agentmsg_hook.py runs this module, and this module the bundle, from their own ``.pyc`` files (a
script's code is compiled on every run, about 1 ms for all of this, so the script is kept to a few lines).
Standard library only, and no ``os``: the pre-tool hook runs before every tool call, and ``import os``
would cost it about 0.13x the interpreter floor (agentmsg/pathops.py).  No ``from __future__ import
annotations`` either (it would cost a path search before the bundle's finder is in place).  Whatever goes
wrong (a broken checkout, damaged state), the hook exits 0 with no output.
"""

import posix
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType


def main(plugin_root: str, compiled: "Callable[[str, str], ModuleType | None]") -> int:
    """Run the hook ``sys.argv`` names (``HOST [MODE ARGS...]``); the hooks' exit code (0 unless a hook asks).
    ``compiled(plugin_root, "bundle")`` is hooks/agentmsg_hook.py's loader of a module from its own ``.pyc``."""
    host = sys.argv[1] if len(sys.argv) > 1 else ""
    try:
        data = _env("CLAUDE_PLUGIN_DATA") or _env("PLUGIN_DATA")
        if data and not posix.access(plugin_root.rstrip("/") + "/agentmsg", 2):  # 2: W_OK
            # A read-only checkout: keep compiled modules in the plugin's data folder instead.
            sys.pycache_prefix = data.rstrip("/") + "/pycache"
        mode = sys.argv[2] if len(sys.argv) > 2 else ""
        if mode == "wait":  # Claude Code's asyncRewake waiter (agentmsg/hooks/waiter.py)
            from agentmsg.hooks.waiter import main as wait

            return wait(host)
        bundle = compiled(plugin_root, "bundle") or _import_bundle()  # one read for the hook's compiled modules
        finder = bundle.load(plugin_root)
        try:
            code = _hook(mode).main(host)
        finally:
            bundle.save(finder)
        # The hooks write their output with os.write and close what they open: the interpreter's teardown
        # (about 2 ms of module and object clean-up) would change nothing, so it is skipped.
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        posix._exit(code)
    except BaseException as exc:  # fail open, before agentmsg.hooks.entry can
        log(host, exc)
    return 0


def _hook(mode: str) -> "ModuleType":
    if mode == "pretool":  # claims before a tool runs (agentmsg/hooks/pretool.py)
        from agentmsg.hooks import pretool

        return pretool
    if mode == "edited":  # collision notices after an edit tool (agentmsg/hooks/edited.py)
        from agentmsg.hooks import edited

        return edited
    from agentmsg.hooks import entry

    return entry


def _import_bundle() -> "ModuleType":
    from agentmsg.hooks import bundle

    return bundle


def _env(name: str) -> str:
    value = posix.environ.get(name.encode())
    return value.decode(sys.getfilesystemencoding(), "surrogateescape") if value else ""


def log(host: str, exc: BaseException) -> None:
    """One line in the state root's hooks.log for a hook that could not run, as the tool hooks log theirs."""
    try:
        from agentmsg.hooks.pretool import log_failing_open
        from agentmsg.paths import resolve_root_str

        what = f"hooks/agentmsg_hook.py {host[:10]}: cannot load agentmsg (python {sys.version.split()[0]})"
        log_failing_open(resolve_root_str(None)[0], what, exc)
    except BaseException:  # nowhere left to report to
        pass
