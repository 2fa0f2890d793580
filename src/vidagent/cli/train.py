"""``vidagent train``: Script-Simulated RL for the AgentCVR master (:mod:`vidagent.train`).

- ``train scripts``: synthesize a script set with the ``llm`` role (or the template generator)
- ``train cvr``: GRPO in the text simulator, resumable
- ``train eval``: the trained and the untrained master on held-out simulated scripts
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from vidagent.cli.base import cli, echo_json, on_abort, parse_sets, settings_of


@cli.group()
def train() -> None:
    """Train the cvr master with GRPO on synthetic video scripts (needs vidagent[train])."""


@train.command(name="scripts")
@click.option("--task", required=True, help="NC, CC, PEA, BU, PI, MSR, MOC, PSS or FSA")
@click.option("--n", "count", type=click.IntRange(min=1), required=True, help="scripts wanted")
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--generator",
    type=click.Choice(["llm", "template"]),
    default=None,
    help="llm: the paper's prompts sent to the llm role; template: offline, deterministic "
    "[default: llm, or template when the llm role is the embedded SmolLM2]",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--retries", type=click.IntRange(min=1), default=3, show_default=True)
@click.pass_context
def scripts_cmd(
    ctx: click.Context,
    task: str,
    count: int,
    out: Path,
    generator: str | None,
    seed: int,
    retries: int,
) -> None:
    """Write TASK scripts to OUT/<task>.jsonl (in lower case: moc.jsonl) until it holds N (a
    rerun resumes).

    Without --generator, the embedded SmolLM2 llm gets the template generator: with it the
    paper's prompts wrote no PSS script in 15 minutes (--generator llm still forces it)."""
    from vidagent.app.training import default_generator, write_scripts

    settings = settings_of(ctx)
    chosen = generator or default_generator(settings)
    report = write_scripts(
        settings,
        task,
        count,
        out,
        generator="template" if chosen == "template" else "llm",
        seed=seed,
        retries=retries,
        on_script=lambda s: click.echo(f"  {s['id']}  {s['question'][:70]}", err=True),
    )
    if report.model is None:
        why = "" if generator else ": the default with the embedded SmolLM2 llm"
        click.echo(
            f"{report.path}: {report.written} written, {report.total} in all (template{why})"
        )
        return
    click.echo(
        f"{report.path}: {report.written} written, {report.total} in all, "
        f"{report.rejected} configurations rejected, {report.duplicates} duplicates "
        f"({report.model})"
    )


def _config(path: Path, sets: tuple[str, ...]) -> Any:
    from vidagent.app.training import load_config

    return load_config(path, parse_sets(sets))


@train.command(name="cvr")
@click.option("--config", "config_file", required=True, type=click.Path(path_type=Path))
@click.option("--set", "sets", multiple=True, metavar="SECTION.KEY=VALUE", help="override")
def cvr_cmd(config_file: Path, sets: tuple[str, ...]) -> None:
    """Train the master with GRPO per the config; rerun to resume from the last checkpoint."""
    from vidagent.app.training import train_cvr

    on_abort("the same command resumes the run from its last checkpoint")
    report = train_cvr(_config(config_file, sets), log=click.echo)
    plot = f"; plot {report.plot}" if report.plot else ""
    now = report.steps - report.resumed_from
    resumed = f", resumed from step {report.resumed_from}" if report.resumed_from else ""
    click.echo(
        f"trained {now} step{'' if now == 1 else 's'} now ({report.steps} in all{resumed}); "
        f"checkpoint {report.checkpoint}; metrics {report.output_dir / 'metrics.jsonl'}" + plot
    )


@train.command(name="eval")
@click.option("--config", "config_file", required=True, type=click.Path(path_type=Path))
@click.option(
    "--checkpoint",
    type=click.Path(file_okay=False, path_type=Path),
    help="trained model (default: the run's latest checkpoint)",
)
@click.option("--set", "sets", multiple=True, metavar="SECTION.KEY=VALUE", help="override")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def eval_cmd(
    config_file: Path, checkpoint: Path | None, sets: tuple[str, ...], as_json: bool
) -> None:
    """Score the untrained and the trained master on the config's held-out scripts."""
    from vidagent.app.training import evaluate_cvr

    result = evaluate_cvr(_config(config_file, sets), checkpoint)
    if as_json:
        echo_json([vars(s) for s in result.scores])
        return
    click.echo(f"{result.heldout} held-out scripts, greedy, max {result.max_turns} turns")
    for s in result.scores:
        click.echo(
            f"{s.label:>9}  reward {s.reward:.3f}  well-formed {s.format_rate:.1%}  "
            f"accuracy {s.accuracy:.1%} (majority answer {s.majority_answer}: "
            f"{s.majority_baseline:.1%})  simulator calls {s.simulator_calls:.2f}/episode  "
            f"({s.model})"
        )
