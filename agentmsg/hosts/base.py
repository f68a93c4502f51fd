"""What every host module shares: running a host's own CLI for its install steps."""

from __future__ import annotations

from collections.abc import Mapping


def run_host_cli(host: str, args: list[str], env: Mapping[str, str]) -> tuple[bool, str]:
    import shutil
    import subprocess

    exe = shutil.which(host, path=env.get("PATH"))
    if exe is None:
        return False, f"`{host}` is not on PATH"
    try:
        done = subprocess.run([exe, *args], env=dict(env), capture_output=True, timeout=120, check=False,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    text = (done.stdout + done.stderr).decode(errors="replace").strip().splitlines()
    return done.returncode == 0, (text[-1] if text else f"exit {done.returncode}")[:300]
