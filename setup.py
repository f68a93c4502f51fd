"""Ship the host files inside the wheel, as ``agentmsg/_plugin/``: ``hooks/``, ``bin/agentmsg``,
``skills/agentmsg/`` and the host manifests (Copilot's marketplace and ``.plugin/``, Gemini's extension), so that
a pip, pipx or uv tool install can run ``agentmsg install codex|gemini|copilot``.

Copied at build time from the repository root (the one source of truth); nothing is written into the
source tree (nor are the build folders: see _outside_the_tree).  Everything else is in pyproject.toml.
"""

import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
SHIPPED = ("hooks/run", "hooks/agentmsg_hook.py", "hooks/hooks.json", "hooks/codex-hooks.json", "bin/agentmsg",
           "skills/agentmsg/SKILL.md",
           "hooks/copilot-hooks.json", "plugin.json", ".claude-plugin/plugin.json", ".claude-plugin/marketplace.json",
           ".plugin/plugin.json", "gemini-extension.json", "GEMINI.md",
           "opencode/agentmsg.js", "opencode/package.json")


class BuildWithPlugin(build_py):
    def run(self):
        super().run()
        for rel in SHIPPED:
            src = os.path.join(HERE, rel)
            if not os.path.isfile(src):
                continue  # building from an sdist that already holds agentmsg/_plugin
            dst = _fresh_file(os.path.join(self.build_lib, "agentmsg"), "_plugin/" + rel)
            with open(src, "rb") as fin, os.fdopen(dst, "wb") as fout:
                shutil.copyfileobj(fin, fout)
                os.fchmod(fout.fileno(), 0o755 if rel in ("hooks/run", "bin/agentmsg") else 0o644)


def _fresh_file(base, rel):
    """A new file ``base/rel`` opened for writing: no folder below ``base`` may be a symlink, and whatever
    was at the file (a link planted in the build folder, an earlier build's copy) is removed, never followed."""
    *folders, name = rel.split("/")
    path = base
    for part in folders:
        path = os.path.join(path, part)
        if os.path.islink(path):
            raise SystemExit(f"{path} is a symlink; refusing to copy the plugin files through it")
        os.makedirs(path, exist_ok=True)
    path = os.path.join(path, name)
    if os.path.lexists(path):
        os.unlink(path)
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)


def _outside_the_tree():
    """Build folders in a private temporary directory, removed when the build ends, never ``build/`` and
    ``agentmsg.egg-info/`` in the source tree: a clone that was pip-installed stays a clean plugin folder, and the
    hosts that copy it (Codex, ``gemini extensions install``) copy no build debris (issue 30)."""
    import atexit
    import tempfile

    scratch = tempfile.mkdtemp(prefix="agentmsg-build-")
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    return {"build": {"build_base": os.path.join(scratch, "build")}, "egg_info": {"egg_base": scratch}}


setup(cmdclass={"build_py": BuildWithPlugin}, options=_outside_the_tree())
