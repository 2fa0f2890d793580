"""llama.cpp's flash attention against its plain attention, on the bundled SmolLM2, in one run.

For each prompt length (``--tokens``, default 500, 2,000 and 5,000) the bundled SmolLM2-135M
(``llamacpp:smollm2-135m``) answers a transcript-like prompt of about that many tokens with at
most 16 tokens, with ``flash_attn=0`` and with ``flash_attn=1`` (the default), alternating,
``--repeat`` times each (default 2); the best seconds of each and their ratio are printed, and
the prompt's tokens a second. Each call's prompt starts with its own line, so llama.cpp's prefix
cache never skips a prompt's evaluation. The two settings round differently, so their replies
may differ (a small model's greedy reply can part on a near-tie); the benchmark prints whether
each length's replies were the same.

``--busy`` runs the same table beside one process spinning on one core, in a session of its
own (``shared_cpu.busy_loop``), as on a machine shared with other work: each call then runs on
the one core left free (``vidagent.models.cpu.cpu_free``).

The CPU (model, vector extensions, load average) is printed first (``benchmarks/_cpu.py``).

    .venv/bin/python benchmarks/llm_attention.py [--tokens 500,2000,5000] [--repeat 2] [--busy]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# this folder is on sys.path when run as a script
from _cpu import describe
from shared_cpu import busy_loop, load1, long_prompt


def call(adapter: Any, tokens: int, tag: str) -> tuple[float, int, str]:
    """Seconds, prompt tokens and reply of one call of about ``tokens`` prompt tokens."""
    from vidagent.models.base import ChatRequest, Message

    prompt = long_prompt(adapter._load(), tokens, tag)
    started = time.perf_counter()
    reply = adapter.chat(
        ChatRequest(messages=(Message("user", prompt),), max_tokens=16, temperature=0.0)
    )
    return time.perf_counter() - started, reply.usage.input_tokens, reply.text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", default="500,2000,5000", help="prompt lengths, comma-separated")
    parser.add_argument("--repeat", type=int, default=2, help="calls per setting and length")
    parser.add_argument("--busy", action="store_true", help="beside one process spinning on a core")
    args = parser.parse_args()
    from vidagent.models.llamacpp import LlamaCppAdapter

    print(describe())
    adapters = {
        flash: LlamaCppAdapter("smollm2-135m", {"flash_attn": flash}) for flash in ("0", "1")
    }
    for adapter in adapters.values():
        call(adapter, 200, "warm-up")
    with busy_loop() if args.busy else contextlib.nullcontext():
        if args.busy:
            print("beside one process spinning on one core (its own session)")
        table(adapters, [int(t) for t in args.tokens.split(",")], args.repeat)
    for adapter in adapters.values():
        adapter.close()


def table(adapters: dict[str, Any], lengths: list[int], repeat: int) -> None:
    """One row a prompt length: each setting's best of ``repeat`` calls and their ratio."""
    print("prompt tokens | flash_attn=0 s (tok/s) | flash_attn=1 s (tok/s) | 1 / 0 | same reply")
    for tokens in lengths:
        best = {"0": (float("inf"), 0), "1": (float("inf"), 0)}
        replies: dict[str, set[str]] = {"0": set(), "1": set()}
        for i in range(repeat):
            for flash, adapter in adapters.items():
                seconds, prompt, reply = call(adapter, tokens, f"{tokens}-{i}")
                replies[flash].add(reply)
                best[flash] = min(best[flash], (seconds, prompt))
        cells = [f"{s:.2f} ({n / s:.0f})" for s, n in best.values()]
        print(
            f"{best['0'][1]} | {cells[0]} | {cells[1]} | {best['1'][0] / best['0'][0]:.2f} | "
            f"{'yes' if replies['0'] == replies['1'] else 'no'}   (load {load1():.1f})"
        )


if __name__ == "__main__":
    main()
