"""The documentation's examples still run.

Every ``vidagent …`` line in a shell block of the README or a page under ``docs/`` is parsed by
the real click commands: a command, option or choice that no longer exists fails here. The
Python blocks of a page run in order, in one namespace, on a real clip named as the examples
name it, with the embedded offline models (they skip with a reason where the clip cannot be
had). ``mkdocs build --strict`` (broken links and anchors, missing pages, a reference that no
longer resolves) runs in the test command beside pytest; a test here runs that very command line
on a throwaway site with a broken link and one with a broken anchor, and expects it to fail.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from vidagent.cli.base import cli

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _blocks(page: Path, *langs: str) -> list[str]:
    return [m[2] for m in FENCE.finditer(page.read_text()) if m[1] in langs]


def _commands(block: str) -> list[str]:
    """The ``vidagent`` command lines of a shell block, continuations joined, comments dropped."""
    lines = block.replace("\\\n", " ").splitlines()
    found = []
    for line in lines:
        line = line.strip().removeprefix("$ ")
        if line.startswith("vidagent ") or line == "vidagent":
            found.append(line)
    return found


def _check(args: list[str]) -> None:
    """Parse ``args`` as the CLI would, down to the leaf command; raise on what click refuses.

    Values are not converted against the file system (an example names files the test does not
    have): only commands, options, their arity and choices are checked.
    """
    command: click.Command = cli
    ctx = command.make_context("vidagent", list(args), resilient_parsing=True)
    while isinstance(command, click.Group):
        rest = [*ctx._protected_args, *ctx.args]
        if not rest:
            return
        wanted = rest[0]
        name, sub, rest = command.resolve_command(ctx, rest)
        if sub is None or name is None:
            raise click.UsageError(f"no such command {wanted!r}")
        command = sub
        ctx = sub.make_context(name, rest, parent=ctx, resilient_parsing=True)
    # resilient parsing ignores unknown options and surplus arguments: look for them here
    params = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
    for arg in args:
        opt = arg.split("=", 1)[0]
        known = opt in params or opt == "--help" or any(opt in p.opts for p in cli.params)
        if opt.startswith("--") and not known:  # (a group option may be given later)
            raise click.NoSuchOption(opt)
    for p in command.params:
        value = ctx.params.get(p.name or "")
        if isinstance(p.type, click.Choice) and value is not None:
            values = value if isinstance(value, tuple | list) else [value]
            for v in values:
                if str(v) not in [str(c) for c in p.type.choices]:
                    raise click.BadParameter(f"{v!r} is not one of {p.type.choices}", param=p)


EXAMPLES = [
    pytest.param(line, id=f"{page.relative_to(ROOT)}:{line[:60]}")
    for page in PAGES
    for block in _blocks(page, "bash", "sh", "shell", "console")
    for line in _commands(block)
]


def test_the_docs_have_command_examples() -> None:
    assert len(EXAMPLES) > 20  # the pages were found and read


@pytest.mark.parametrize("line", EXAMPLES)
def test_cli_example_parses(line: str) -> None:
    code = line.split(" #", 1)[0]
    code = code.split(" | ", 1)[0].split(" > ", 1)[0].split(" && ", 1)[0]
    args = [a for a in shlex.split(code)[1:] if a not in ("…", "...")]  # "…": elided options
    try:
        _check(args)
    except click.UsageError as e:
        pytest.fail(f"the documented command no longer parses: {line!r}: {e.format_message()}")


PY_PAGES = [
    pytest.param(page, id=str(page.relative_to(ROOT)))
    for page in PAGES
    if _blocks(page, "python") and "vidagent" in "".join(_blocks(page, "python"))
]


SHORT_CLIP_PAGES = {"docs/guide/python.md": "conversation.mp4", "docs/live.md": "countdown.mp4"}


@pytest.mark.realmedia
@pytest.mark.models
@pytest.mark.parametrize("page", PY_PAGES)
def test_python_examples_run(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from realmedia import get_clip

    blocks = _blocks(page, "python")
    names = set(re.findall(r"\"([\w.-]+\.(?:mp4|avi|mkv))\"", "".join(blocks)))
    # The narrated 3-minute clip, or a shorter one where a page's example needs no more: the
    # Python guide indexes its whole clip with every offline model (a 64-second spoken
    # conversation: its times fit in it), the live page's watch window by window (an 8-second
    # countdown).
    clip = get_clip(
        SHORT_CLIP_PAGES.get(page.relative_to(ROOT).as_posix(), "wannaworktogether.mp4")
    )
    for name in names:
        shutil.copy(clip, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))  # "~/.vidagent/…" in an example is this test's
    monkeypatch.setenv("VIDAGENT_HOME", str(tmp_path / ".vidagent"))
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for number, block in enumerate(blocks, 1):
        # Running the page's own code is the point; a failure's traceback names the block.
        code = compile(block, f"{page.relative_to(ROOT)}, python block {number}", "exec")
        exec(code, namespace)  # noqa: S102
    assert capsys.readouterr().out  # the examples print what they show


def _docs_build(site: Path) -> subprocess.CompletedProcess[str]:
    """The test command's own ``mkdocs build`` line (scripts/test.sh) run on the throwaway site
    ``site`` (its ``mkdocs.yml`` and ``docs/``), with this checkout's validation settings."""
    import yaml

    (line,) = [
        line
        for line in (ROOT / "scripts" / "test.sh").read_text().splitlines()
        if "mkdocs build" in line and not line.lstrip().startswith("#")
    ]
    words = shlex.split(line)
    if words[0] == "beside":  # run beside the tests: ``beside NAME COMMAND...``
        words = words[2:]
    env = dict(os.environ)
    while "=" in words[0]:  # VAR=value before the command
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    assert words[0].endswith("mkdocs") and words[1] == "build", line
    args = words[2:]
    if "--site-dir" in args:
        del args[args.index("--site-dir") : args.index("--site-dir") + 2]
    ours = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    config = {"site_name": "throwaway", "theme": "mkdocs", "validation": ours["validation"]}
    (site / "mkdocs.yml").write_text(yaml.safe_dump(config))
    command = [sys.executable, "-m", "mkdocs", "build", *args, "-f", str(site / "mkdocs.yml")]
    command += ["--site-dir", str(site / "out")]
    return subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=120, check=False
    )


@pytest.mark.parametrize(
    ("link", "fails_with"),
    [
        ("other.md#there", None),
        ("missing.md", "missing.md"),
        ("other.md#nowhere", "#nowhere"),
    ],
    ids=["sound", "broken-link", "broken-anchor"],
)
def test_the_docs_build_fails_on_a_broken_link_or_anchor(
    tmp_path: Path, link: str, fails_with: str | None
) -> None:
    pytest.importorskip("mkdocs", reason="the docs extra is not installed")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(f"# Home\n\nSee [the other page]({link}).\n")
    (docs / "other.md").write_text("# Other\n\n## There\n\nHere.\n")
    built = _docs_build(tmp_path)
    if fails_with is None:
        assert built.returncode == 0, built.stderr
        assert (tmp_path / "out" / "other" / "index.html").is_file()
    else:
        assert built.returncode != 0, f"mkdocs passed a page linking {link}:\n{built.stderr}"
        assert fails_with in built.stderr and "WARNING" in built.stderr
