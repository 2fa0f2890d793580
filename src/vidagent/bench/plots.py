"""Report plots as PNG: accuracy by category, and accuracy against cost per run (both numbers
with their intervals). ``bench compare`` draws its own (:func:`vidagent.bench.compare.plot_comparison`).

matplotlib is optional (the ``bench`` extra) and imported here only, when a report is written
with plots. Figures are drawn with :class:`matplotlib.figure.Figure` directly, not pyplot, so no
GUI backend is chosen or needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidagent.exceptions import BackendMissingError

if TYPE_CHECKING:
    from vidagent.bench.report import RunReport


def require_matplotlib() -> Any:
    """The ``matplotlib.figure`` module.

    Raises:
        BackendMissingError: matplotlib is not installed; names the ``bench`` extra.
    """
    try:
        from matplotlib import figure
    except ImportError:
        raise BackendMissingError("matplotlib (report plots)", "bench") from None
    return figure


def _panels(reports: Sequence[RunReport]) -> list[tuple[str, list[RunReport], str]]:
    """(title, runs, section) per subplot: each breakdown of each benchmark, else its overall."""
    from vidagent.bench.report import groups

    panels = []
    for runs in groups(reports).values():
        s = runs[0].scores
        title = f"{runs[0].manifest.get('title', s.benchmark)} {s.split}"
        sections = [name for name in s.sections if s.sections[name]]
        panels += [(f"{title}: {name}", runs, name) for name in sections] or [(title, runs, "")]
    return panels


def plot_categories(reports: Sequence[RunReport], path: Path) -> Path:
    """Grouped bars: the official number per category (one bar per run), 95% interval whiskers."""
    figure = require_matplotlib()
    panels = _panels(reports)
    widest = max(len(_keys(runs, section)) * len(runs) for _, runs, section in panels)
    fig = figure.Figure(figsize=(max(6.0, 0.35 * widest + 2), 3.2 * len(panels)))
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    for ax, (title, runs, section) in zip(axes, panels, strict=False):
        keys = _keys(runs, section)
        width = 0.8 / len(runs)
        for n, run in enumerate(runs):
            values, low, high = [], [], []
            for key in keys:
                cell = _cell(run, section, key)
                value = cell.score if cell is not None else 0.0
                interval = run.intervals.get(f"{section}/{key}" if section else "overall")
                lo, hi = interval.score if interval else (value, value)
                values.append(value)
                low.append(max(0.0, value - lo))
                high.append(max(0.0, hi - value))
            xs = [i + (n - (len(runs) - 1) / 2) * width for i in range(len(keys))]
            ax.bar(xs, values, width, yerr=[low, high], capsize=2, label=run.name)
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels(
            keys, rotation=45 if len(keys) > 8 else 0, ha="right" if len(keys) > 8 else "center"
        )
        ax.set_ylabel(runs[0].scores.metric if len(runs[0].scores.metric) < 20 else "score")
        ax.set_ylim(0, 105)
        ax.set_title(f"{title} (official, {0.95:.0%} CI)", fontsize=10)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def _keys(runs: Sequence[RunReport], section: str) -> list[str]:
    if not section:
        return ["overall"]
    keys: dict[str, None] = {}
    for run in runs:
        keys.update(dict.fromkeys(run.scores.sections.get(section, {})))
    return list(keys)


def _cell(run: RunReport, section: str, key: str) -> Any:
    if not section:
        return run.scores.overall
    return run.scores.sections.get(section, {}).get(key)


def plot_accuracy_vs_cost(reports: Sequence[RunReport], path: Path) -> Path:
    """One point per run: the official overall number against its mean cost per question,
    each with its 95% interval (:func:`vidagent.bench.report.intervals`).

    Runs without prices (every cost 0) are placed by mean tokens per question instead, and the
    axis says so.
    """
    figure = require_matplotlib()
    by_cost = any((r.means.get("cost_usd") or 0.0) > 0 for r in reports)
    key, label = (
        ("cost_usd", "mean cost per question (USD)")
        if by_cost
        else ("tokens", "mean tokens per question (no prices configured)")
    )
    fig = figure.Figure(figsize=(6.5, 4.5))
    ax = fig.subplots()
    for (bench, split), runs in _by_group(reports).items():
        xs = [r.means.get(key) or 0.0 for r in runs]
        ys = [r.scores.overall.score for r in runs]
        lows, highs = [], []
        for r, y in zip(runs, ys, strict=False):
            lo, hi = r.intervals["overall"].score if "overall" in r.intervals else (y, y)
            lows.append(max(0.0, y - lo))
            highs.append(max(0.0, hi - y))
        # The mean's own bootstrap interval across (a run without one: no whisker).
        xlows, xhighs = [], []
        for r, x in zip(runs, xs, strict=False):
            lo, hi = r.mean_intervals.get(key, (x, x))
            xlows.append(max(0.0, x - lo))
            xhighs.append(max(0.0, hi - x))
        ax.errorbar(
            xs,
            ys,
            xerr=[xlows, xhighs],
            yerr=[lows, highs],
            fmt="o",
            capsize=3,
            label=f"{bench} {split}",
        )
        for r, x, y in zip(runs, xs, ys, strict=False):
            ax.annotate(r.name, (x, y), textcoords="offset points", xytext=(5, 5), fontsize=8)
    ax.set_xlabel(label)
    ax.set_ylabel("official overall score")
    ax.set_title("accuracy against cost, per run (95% CI)", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def _by_group(reports: Sequence[RunReport]) -> dict[tuple[str, str], list[RunReport]]:
    from vidagent.bench.report import groups

    return groups(reports)


def plot_risk_coverage(reports: Sequence[RunReport], path: Path) -> Path:
    """One panel per benchmark and split: each run's risk against coverage (a step at each
    distinct answer score), its AURC in the legend."""
    figure = require_matplotlib()
    grouped = [
        (group, [(r.name, r.risk_coverage) for r in runs if r.risk_coverage is not None])
        for group, runs in _by_group(reports).items()
    ]
    grouped = [(g, curves) for g, curves in grouped if curves]
    fig = figure.Figure(figsize=(6.5, 3.6 * len(grouped)))
    axes = fig.subplots(len(grouped), 1, squeeze=False)[:, 0]
    for ax, ((bench, split), curves) in zip(axes, grouped, strict=False):
        for name, rc in curves:
            xs = [0.0, *(c for c, _ in rc.points)]
            ys = [rc.points[0][1], *(risk for _, risk in rc.points)]
            label = f"{name} (AURC {rc.aurc:.3f}, {rc.answers} answers by {rc.source})"
            ax.step(xs, ys, where="pre", label=label)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("coverage (share of answers kept, most sure first)")
        ax.set_ylabel("risk (1 - accuracy of those kept)")
        ax.set_title(f"{bench} {split}: risk against coverage", fontsize=10)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def plot_ladders(reports: Sequence[RunReport], path: Path) -> Path:
    """Frame-budget ladders: the official overall number, mean cost (by tokens without prices)
    and mean latency against the mean frames sent, one line per benchmark and strategy through
    its budgets, every point with its 95% intervals."""
    from vidagent.bench.report import frame_cap, ladders

    figure = require_matplotlib()
    found = ladders(reports)
    by_cost = any((r.means.get("cost_usd") or 0.0) > 0 for runs in found for r in runs)
    cost = ("cost_usd", "mean cost per question (USD)") if by_cost else ("tokens", "mean tokens")
    panels = [
        ("score", "official overall score"),
        cost,
        ("latency_s", "mean latency per question (s)"),
    ]
    fig = figure.Figure(figsize=(6.5, 3.2 * len(panels)))
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    for ax, (key, label) in zip(axes, panels, strict=False):
        for runs in found:
            xs = [r.means.get("frames") or 0.0 for r in runs]
            xerr = _whiskers(xs, [r.mean_intervals.get("frames") for r in runs])
            if key == "score":
                ys = [r.scores.overall.score for r in runs]
                spans = [
                    r.intervals["overall"].score if "overall" in r.intervals else None for r in runs
                ]
            else:
                ys = [r.means.get(key) or 0.0 for r in runs]
                spans = [r.mean_intervals.get(key) for r in runs]
            first = runs[0]
            name = f"{first.scores.benchmark} {first.scores.split} {first.manifest['strategy']}"
            ax.errorbar(
                xs, ys, xerr=xerr, yerr=_whiskers(ys, spans), fmt="o-", capsize=3, label=name
            )
            for r, x, y in zip(runs, xs, ys, strict=False):
                ax.annotate(
                    f"cap {frame_cap(r)}",
                    (x, y),
                    textcoords="offset points",
                    xytext=(4, 4),
                    fontsize=7,
                )
        ax.set_xlabel("mean frames sent per question")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
    axes[0].set_title("frame-budget ladders (95% CI)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def _whiskers(
    values: Sequence[float], spans: Sequence[tuple[float, float] | None]
) -> list[list[float]]:
    """Error-bar lengths below and above each value from its interval (none: no whisker)."""
    low = [max(0.0, v - s[0]) if s else 0.0 for v, s in zip(values, spans, strict=True)]
    high = [max(0.0, s[1] - v) if s else 0.0 for v, s in zip(values, spans, strict=True)]
    return [low, high]
