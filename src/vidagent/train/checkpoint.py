"""Checkpoints that survive SIGKILL: written to a temporary folder, then renamed into place.

``<output_dir>/checkpoints/step-000012/`` holds the policy (``save_pretrained``: a full model, or a
LoRA adapter plus ``base_model.txt``), its tokenizer, ``optimizer.pt``, ``rng.pt`` and
``trainer_state.json`` (step, epoch, the config). The rename is atomic, so a folder named
``step-*`` is always complete; a half-written ``.tmp-*`` folder of a killed run is removed on
the next start. The policy part is a ``from_pretrained`` folder: ``--llm transformers:<dir>``
deploys it as the ``cvr`` master.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

STATE = "trainer_state.json"


def checkpoints(output_dir: Path) -> list[Path]:
    """Complete checkpoints, oldest first."""
    root = output_dir / "checkpoints"
    if not root.is_dir():
        return []
    return sorted(p for p in root.glob("step-*") if (p / STATE).is_file())


def latest(output_dir: Path) -> Path | None:
    found = checkpoints(output_dir)
    return found[-1] if found else None


def save(
    output_dir: Path,
    step: int,
    *,
    model: Any,
    tokenizer: Any,
    optimizer: Any,
    state: dict[str, Any],
    base_model: str,
    keep: int = 2,
) -> Path:
    """Write checkpoint ``step`` atomically and drop all but the ``keep`` newest."""
    import numpy as np
    import torch

    root = output_dir / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step:06d}"
    tmp = root / f".tmp-step-{step:06d}"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    if (tmp / "adapter_config.json").is_file():
        (tmp / "base_model.txt").write_text(base_model + "\n", encoding="utf-8")
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    rng = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    torch.save(rng, tmp / "rng.pt")
    (tmp / STATE).write_text(json.dumps({**state, "step": step}, indent=2), encoding="utf-8")
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    for old in checkpoints(output_dir)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


def clean_partial(output_dir: Path) -> None:
    """Remove the half-written checkpoint folders of a killed run."""
    root = output_dir / "checkpoints"
    for tmp in root.glob(".tmp-*") if root.is_dir() else []:
        shutil.rmtree(tmp, ignore_errors=True)


def load_state(path: Path, optimizer: Any) -> dict[str, Any]:
    """Restore the optimiser and RNGs from checkpoint ``path``; its trainer state."""
    import numpy as np
    import torch

    optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=False))
    rng = torch.load(path / "rng.pt", weights_only=False)
    random.setstate(rng["python"])
    np.random.set_state(rng["numpy"])
    torch.set_rng_state(rng["torch"])
    return json.loads((path / STATE).read_text(encoding="utf-8"))  # type: ignore[no-any-return]
