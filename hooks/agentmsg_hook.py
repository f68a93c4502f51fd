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
            bundle = _bundle_module(plugin_root)
            if bundle is None:
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
            # The hooks write their output with os.write and close what they open: the interpreter's
            # teardown (about 2 ms of module and object clean-up) would change nothing, so it is skipped.
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            os._exit(code)
    except BaseException as exc:  # fail open, before agentmsg.hooks.entry can
        _log(host, exc)
        return 0
    return main(host)


def _bundle_module(plugin_root):
    """agentmsg/hooks/bundle.py from its own .pyc, checked as the import system checks it (magic, source
    mtime and size), without the path search for it and the two packages above it (about 0.5 ms; they then
    come from the bundle, as the rest do).  None (import it the ordinary way) on any doubt."""
    try:
        if sys.pycache_prefix:
            return None
        import marshal
        from _frozen_importlib_external import MAGIC_NUMBER

        source = os.path.join(plugin_root, "agentmsg", "hooks", "bundle.py")
        st = os.stat(source)
        with open(os.path.join(plugin_root, "agentmsg", "hooks", "__pycache__",
                               "bundle.{}.pyc".format(sys.implementation.cache_tag)), "rb") as fh:  # noqa: UP032
            data = fh.read()
        if (data[:4] != MAGIC_NUMBER or data[4:8] != b"\0\0\0\0"
                or data[8:12] != (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
                or data[12:16] != (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")):
            return None
        module = type(sys)("agentmsg.hooks.bundle")
        module.__file__ = source
        exec(marshal.loads(memoryview(data)[16:]), module.__dict__)
        return module
    except Exception:
        return None


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
