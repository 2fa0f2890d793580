"""Install packages into a Python environment with uv, where pip would have found them.

    .venv/bin/python scripts/pip_install.py PYTHON [uv pip install arguments...]

Used by scripts/setup.sh and scripts/check-wheel.sh. uv downloads in parallel, builds a source
distribution (llama-cpp-python) while the wheels download, and installs from its cache by
linking: a full setup's downloads and installs took 13 s against pip's 86 s with empty caches
(docs/development.md). uv reads none of pip's settings, so the ones a machine sets for pip (its
environment and pip.conf: index, extra indexes, find-links, constraints, certificate, timeout)
are passed on, with pip's precedence (environment, then `install`, then `global`); a local
path or file:// index that does not exist is left out, as pip leaves it out with a warning.
The index strategy is pip's: the best version across every index.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from urllib.parse import urlparse
from urllib.request import url2pathname

from uv import find_uv_bin

RANK = {":env:": 0, "install": 1, "global": 2}


def pip_settings() -> dict[str, str]:
    """pip's effective value of each setting, from ``pip config list``."""
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True
    ).stdout
    found: dict[str, tuple[int, str]] = {}
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        section, _, name = key.partition(".")
        if section in RANK and (name not in found or RANK[section] < found[name][0]):
            found[name] = (RANK[section], str(ast.literal_eval(value)))
    return {name: value for name, (_, value) in found.items()}


def present(location: str) -> bool:
    """A remote location, or a local one that exists."""
    if location.startswith("file:"):
        return os.path.exists(url2pathname(urlparse(location).path))
    return "://" in location or os.path.exists(location)


def main(target: str, *args: str) -> None:
    settings = pip_settings()
    env = dict(os.environ)
    options = ["--python", target, "--index-strategy", "unsafe-best-match"]
    if "index-url" in settings:
        options += ["--index-url", settings["index-url"]]
    for flag, name in (
        ("--extra-index-url", "extra-index-url"),
        ("--find-links", "find-links"),
        ("--constraint", "constraint"),
    ):
        options += [
            word
            for value in settings.get(name, "").split()
            if present(value)
            for word in (flag, value)
        ]
    if "cert" in settings:
        env.setdefault("SSL_CERT_FILE", settings["cert"])
    if "default-timeout" in settings:
        env.setdefault("UV_HTTP_TIMEOUT", settings["default-timeout"].split(".")[0])
    uv = find_uv_bin()
    os.execve(uv, [uv, "pip", "install", *options, *args], env)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python scripts/pip_install.py PYTHON [uv pip install arguments...]")
    main(*sys.argv[1:])
