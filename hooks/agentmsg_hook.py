"""Hook entry from a plugin checkout: ``python3 -I -S hooks/agentmsg_hook.py HOST [MODE ARGS...]``.

Puts the plugin root (this file's parent directory; for the copy shipped in a wheel,
``agentmsg/_plugin/hooks``, the folder holding the package) first on ``sys.path`` and runs
agentmsg/hooks/start.py: no virtual environment, no site-packages, standard library only.  A script's
code is compiled on every run (about 1 ms for the whole entry), so this one is a few lines: start.py,
and the bundle it loads, come from their own ``.pyc`` files.  Whatever goes wrong (an interpreter too
old to import the package, a broken checkout), it exits 0 with no output.  Kept free of newer syntax
so that even an old python3 reaches the guard.
"""

import sys


def _compiled(root, name):
    """agentmsg/hooks/NAME.py run from its own ``.pyc``, checked as the import system checks it (magic, the
    source's mtime and size), without the path search for it and the packages above it (about 0.5 ms; they
    then come from the bundle, as the rest do).  None (import it the ordinary way) on any doubt."""
    try:
        if sys.pycache_prefix:
            return None
        from _frozen_importlib_external import MAGIC_NUMBER
        from marshal import loads
        from posix import stat

        source = root.rstrip("/") + "/agentmsg/hooks/" + name + ".py"
        st = stat(source)
        with open(source[:-len(name) - 3] + "__pycache__/" + name + "." + sys.implementation.cache_tag + ".pyc",
                  "rb") as fh:
            data = fh.read()
        if data[:8] != MAGIC_NUMBER + b"\0\0\0\0" or data[8:16] != (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(
                4, "little") + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little"):
            return None
        module = type(sys)("agentmsg.hooks." + name)
        module.__file__ = source
        exec(loads(memoryview(data)[16:]), module.__dict__)
        return module
    except Exception:
        return None


def _main():
    from posix import getcwd

    parts = []
    for part in (__file__ if __file__[:1] == "/" else getcwd() + "/" + __file__).split("/")[:-2]:
        if part == "..":
            parts = parts[:-1]
        elif part and part != ".":
            parts.append(part)
    if parts[-2:] == ["agentmsg", "_plugin"]:  # inside an installed wheel
        parts = parts[:-2]
    root = "/" + "/".join(parts)
    sys.path.insert(0, root)
    if sys.argv[2:3] == ["helper"]:  # the resident helper (agentmsg/resident/helper.py): above the hooks
        try:
            from agentmsg.resident.helper import main
        except BaseException:
            return 0
        return main(sys.argv[3:])
    start = _compiled(root, "start")
    if start is None:
        try:
            from agentmsg.hooks import start  # the ordinary way, which writes its .pyc
        except BaseException:  # an interpreter too old for agentmsg, a broken checkout: no hook
            return 0
    return start.main(root, _compiled)


if __name__ == "__main__":
    raise SystemExit(_main())
