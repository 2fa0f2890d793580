"""A model call under way ends where its run's check says so (:mod:`vidagent.models.interrupt`):
the embedded llama.cpp model between pieces of the prompt and between generated tokens, and
the next call goes on from what was evaluated. The run's side (a stop, a spent time budget) is
in tests/agents/test_agent_loop.py; a streamed HTTP reply in test_openai_stream.py."""

from __future__ import annotations

import pytest

from vidagent.models.base import ChatRequest, Message
from vidagent.models.interrupt import CallInterrupted, checked_calls
from vidagent.models.registry import module_available


class Check:
    """Counts the times it is asked; raises at the ``stop_at``-th (0: never)."""

    def __init__(self, stop_at: int = 0) -> None:
        self.stop_at, self.asked = stop_at, 0

    def __call__(self) -> None:
        self.asked += 1
        if self.asked == self.stop_at:
            raise RuntimeError("stopped by the caller")


def test_no_check_outside_a_run_and_the_check_of_the_innermost_block() -> None:
    from vidagent.models.interrupt import check_call

    check_call()  # no run: nothing to ask
    outer, inner = Check(), Check(stop_at=1)
    with checked_calls(outer):
        with checked_calls(inner), pytest.raises(CallInterrupted, match="stopped by the caller"):
            check_call()
        check_call()
    assert (outer.asked, inner.asked) == (1, 1)


@pytest.mark.models
@pytest.mark.skipif(not module_available("llama_cpp"), reason="vidagent[llm] not installed")
def test_llama_cpp_stops_between_pieces_and_the_next_call_reuses_what_it_evaluated() -> None:
    from vidagent.models.llamacpp import CHECK_TOKENS, LlamaCppAdapter

    llm = LlamaCppAdapter("smollm2-135m", {"n_ctx": "2048", "n_threads": "1"})
    try:
        items = ", ".join(f"box {i}" for i in range(75))  # two pieces of 256 tokens
        request = ChatRequest((Message("user", f"Count these: {items}. Say OK."),), max_tokens=1)
        first = Check(stop_at=2)  # before the second piece of the prompt
        with checked_calls(first), pytest.raises(CallInterrupted):
            llm.chat(request)
        llama = llm._llama
        assert first.asked == 2 and llama.n_tokens == CHECK_TOKENS == 256
        # the prompt's first piece stays evaluated: the next call evaluates the rest only
        again = Check()
        with checked_calls(again):
            reply = llm.chat(request)
        assert 256 < reply.usage.input_tokens <= 512 and again.asked == 1
        # between generated tokens too: the prompt (one piece), two tokens, then stopped
        short = ChatRequest((Message("user", "Write a long story about a lighthouse."),),
                            max_tokens=200)  # fmt: skip
        late = Check(stop_at=4)
        with checked_calls(late), pytest.raises(CallInterrupted):
            llm.chat(short)
        assert late.asked == 4
    finally:
        llm.close()


@pytest.mark.skipif(not module_available("torch"), reason="torch is not installed")
def test_transformers_asks_the_check_at_each_token_it_generates() -> None:
    import torch

    from vidagent.models.transformers_llm import _Cut

    cut, check = _Cut(prompt_tokens=3), Check(stop_at=2)
    with checked_calls(check):
        assert not cut(torch.tensor([[1, 2, 3, 4]]), None).item()  # generation goes on
        with pytest.raises(CallInterrupted):  # ends generate() where it is
            cut(torch.tensor([[1, 2, 3, 4, 5]]), None)
