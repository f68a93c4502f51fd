"""Hook entry from a plugin checkout: ``python3 -I -S hooks/agentmsg_hook.py claude|codex``.

Puts the plugin root (this file's parent directory; for the copy shipped in a
wheel, ``agentmsg/_plugin/hooks``, the folder holding the package) first on ``sys.path`` and
runs ``agentmsg.hooks.entry.main``: no virtual environment, no site-packages,
standard library only.  Whatever goes wrong (an interpreter too old to import
the package, a broken checkout) it exits 0 with no output, like the hooks.
Kept free of newer syntax so that even an old python3 reaches the guard.
"""

import os
import sys


def _main():
    plugin_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.basename(plugin_root) == "_plugin" and os.path.basename(os.path.dirname(plugin_root)) == "agentmsg":
        plugin_root = os.path.dirname(os.path.dirname(plugin_root))  # inside an installed wheel: agentmsg/_plugin
    sys.path.insert(0, plugin_root)
    host = sys.argv[1] if len(sys.argv) > 1 else ""
    try:
        package = os.path.join(plugin_root, "agentmsg")
        if not os.access(package, os.W_OK) and os.environ.get("CLAUDE_PLUGIN_DATA", os.environ.get("PLUGIN_DATA")):
            # A read-only checkout: keep compiled modules in the plugin's data folder instead.
            data = os.environ.get("CLAUDE_PLUGIN_DATA") or os.environ.get("PLUGIN_DATA")
            sys.pycache_prefix = os.path.join(data, "pycache")
        mode = sys.argv[2] if len(sys.argv) > 2 else ""
        if mode == "wait":  # Claude Code's asyncRewake waiter (agentmsg/hooks/waiter.py)
            from agentmsg.hooks.waiter import main
        elif mode == "helper":  # the resident helper (agentmsg/resident/helper.py)
            from agentmsg.resident.helper import main as helper

            return helper(sys.argv[3:])
        else:
            from agentmsg.hooks import bundle  # one read for the hook's compiled modules

            finder = bundle.load(plugin_root)
            try:
                if mode == "pretool":  # claims before a tool runs (agentmsg/hooks/pretool.py)
                    from agentmsg.hooks.pretool import main
                elif mode == "edited":  # collision notices after an edit tool (agentmsg/hooks/edited.py)
                    from agentmsg.hooks.edited import main
                else:
                    from agentmsg.hooks.entry import main
                code = main(host)
            finally:
                bundle.save(finder)
            if mode in ("pretool", "edited"):  # they write with os.write and hold nothing open: skip the teardown
                os._exit(code)
            return code
    except BaseException as exc:  # fail open, before agentmsg.hooks.entry can
        _log(host, exc)
        return 0
    return main(host)


def _log(host, exc):
    try:
        env = os.environ
        if env.get("AGENTMSG_HOME"):
            root = env["AGENTMSG_HOME"]
        elif env.get("XDG_STATE_HOME"):
            root = os.path.join(env["XDG_STATE_HOME"], "agentmsg")
        else:
            root = os.path.join(env.get("HOME", "/nonexistent"), ".local", "state", "agentmsg")
        if os.path.isdir(root):
            line = "hooks/agentmsg_hook.py {}: cannot load agentmsg (python {}): {}: {}\n".format(
                host[:10], sys.version.split()[0], type(exc).__name__, str(exc).replace("\n", " ")[:300])
            with open(os.path.join(root, "hooks.log"), "a") as fh:
                fh.write(line)
    except BaseException:  # nowhere left to report to
        pass


if __name__ == "__main__":
    raise SystemExit(_main())
