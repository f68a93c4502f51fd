"""Ship the host files inside the wheel, as ``agentmsg/_plugin/``: ``hooks/``, ``bin/agentmsg``,
``skills/agentmsg/`` and the host manifests (Copilot's marketplace and ``.plugin/``, Gemini's extension), so that
a pip, pipx or uv tool install can run ``agentmsg install codex|gemini|copilot``.

Copied at build time from the repository root (the one source of truth); nothing is written into the
source tree.  Everything else is in pyproject.toml.
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
            dst = os.path.join(self.build_lib, "agentmsg", "_plugin", rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(src, dst)
            os.chmod(dst, 0o755 if rel in ("hooks/run", "bin/agentmsg") else 0o644)


setup(cmdclass={"build_py": BuildWithPlugin})
