"""Run the ``vidagent`` command as a user would: a real process with its own home."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def vidagent(
    *args: str, home: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VIDAGENT_HOME": str(home), "HF_HUB_OFFLINE": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "vidagent", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
