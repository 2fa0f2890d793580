"""``python -m vidagent``: the ``vidagent`` command, exiting with its code."""

from vidagent.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
