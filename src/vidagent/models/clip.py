"""Image-text embeddings in one space: CLIP (or SigLIP) with transformers, the ``image_embed`` role.

``clip:<model>`` loads a dual-encoder image-text model and its processor:

* ``<model>`` a local directory holding both, saved by ``save_pretrained`` or downloaded there
  (``huggingface-cli download openai/clip-vit-base-patch32 --local-dir DIR``): nothing is
  fetched; a path that is not such a directory is a ConfigError when the role is created.
* ``<model>`` a hub name (``openai/clip-vit-base-patch32``): for users with a network,
  transformers downloads it on first use into its cache (or finds it there; with
  ``HF_HUB_OFFLINE=1`` only the cache is read). A name that is neither an existing path nor
  shaped like a hub name (``org/name``) is taken for a missing directory.

Supported ``model_type`` values (in ``config.json``): :data:`SUPPORTED`. Needs
``pip install 'vidagent[image-embed]'`` (transformers and torch, imported on first use; without
torchvision transformers falls back to its PIL image processors).

:meth:`ClipEmbedder.embed` embeds texts with the text tower, :meth:`ClipEmbedder.embed_images`
frames (RGB, each (H, W, 3) uint8) with the image tower; both return L2-normalised float32
(N, D) in the same space, so a text's cosine with a frame ranks frames for that text (EEA's
"VideoCLIP-style" retriever, through the ``embed_frames`` ingest stage). Texts longer than the
text tower's context (77 tokens for CLIP) are cut. Options:

* ``device``: the torch device (default ``cpu``);
* ``batch_size``: texts or frames per forward pass (default 32).
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vidagent.exceptions import BackendMissingError, ConfigError
from vidagent.geometry import unit_rows
from vidagent.models.base import (
    Adapter,
    BackendStatus,
    Capabilities,
    EmbedRequest,
    EmbedResponse,
    Usage,
)
from vidagent.models.cpu import quiet_openmp, torch_threads
from vidagent.models.registry import module_available

if TYPE_CHECKING:
    from vidagent.config import Settings

#: model_type in config.json -> how its texts are padded: as each model was trained (SigLIP
#: saw every text padded to its full length, and its text tower pools the last position).
SUPPORTED: dict[str, bool | str] = {"clip": True, "siglip": "max_length"}
_HUB_NAME = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")
_EXAMPLE = "huggingface-cli download openai/clip-vit-base-patch32 --local-dir DIR"


def locate(model: str) -> tuple[str, str | None]:
    """Where to load ``model`` from and its model type: ``(directory, type)`` for a local
    directory, ``(hub name, None)`` for a hub name (its type is known once loaded).

    Raises:
        ConfigError: a missing directory, one without config.json, or an unsupported type.
    """
    path = Path(model).expanduser()
    if not path.exists():
        if _HUB_NAME.fullmatch(model) and not model.startswith("."):
            return model, None
        raise ConfigError(
            f"clip model {model!r}: no such directory; give the directory the weights were saved "
            f"or downloaded to ({_EXAMPLE}), or a hub name"
        )
    config = path / "config.json"
    if not config.is_file():
        raise ConfigError(
            f"clip model {model!r}: not a model directory (no config.json); give the directory "
            f"the weights were saved or downloaded to, e.g. {_EXAMPLE}"
        )
    try:
        model_type = json.loads(config.read_text(encoding="utf-8")).get("model_type", "")
    except (OSError, ValueError, AttributeError) as e:
        raise ConfigError(f"clip model {model!r}: unreadable config.json ({e})") from None
    check_type(model, model_type)
    return str(path), str(model_type)


def check_type(model: str, model_type: str) -> None:
    """Raise ConfigError unless ``model_type`` is one of :data:`SUPPORTED`."""
    if model_type not in SUPPORTED:
        raise ConfigError(
            f"clip model {model!r} is a {model_type or 'untyped'!r} model; "
            f"image-text models supported: {', '.join(SUPPORTED)}"
        )


def status(model: str, options: dict[str, str], settings: Settings) -> BackendStatus:
    if not module_available("transformers") or not module_available("torch"):
        return BackendStatus(
            model, False, "transformers or torch missing: pip install 'vidagent[image-embed]'"
        )
    try:
        _, model_type = locate(model)
    except ConfigError as e:
        return BackendStatus(model, False, str(e))
    if model_type is None:
        return BackendStatus(
            model, True, "transformers image-text embeddings, hub name (downloaded on first use)"
        )
    return BackendStatus(model, True, f"transformers image-text embeddings ({model_type}), local")


class ClipEmbedder(Adapter):
    """Text and image embeddings of one CLIP-like model, in this process (module docstring)."""

    provider = "clip"
    capabilities = Capabilities(roles=frozenset({"image_embed"}), batch_size=32, local=True)

    def __init__(self, model: str, options: dict[str, str] | None = None) -> None:
        super().__init__(model, options)
        self.where, self.model_type = locate(model)
        self.batch = self.number("batch_size", 32, minimum=1)
        self.device = self.options.get("device", "cpu")
        self._loaded: tuple[Any, Any] | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, model: str, options: dict[str, str], settings: Settings) -> ClipEmbedder:
        return cls(model, options)

    def _load(self) -> tuple[Any, Any]:
        """The processor and the model, loaded once (callers hold the lock)."""
        if self._loaded is None:
            quiet_openmp()  # before torch's OpenMP runtime loads
            try:
                import torch  # noqa: F401  - transformers models need it
                from transformers import AutoModel, AutoProcessor
            except ImportError:
                raise BackendMissingError("transformers with torch", "image-embed") from None
            local = self.model_type is not None
            try:
                processor = AutoProcessor.from_pretrained(self.where, local_files_only=local)
                model = AutoModel.from_pretrained(self.where, local_files_only=local)
            except (OSError, ValueError) as e:
                fix = (
                    "save both there with save_pretrained"
                    if local
                    else f"without a network here, run huggingface-cli download {self.where} "
                    "--local-dir DIR where there is one and give clip:DIR"
                )
                raise ConfigError(
                    f"clip model {self.model!r}: cannot load the model and its processor "
                    f"({str(e).splitlines()[0]}); {fix}"
                ) from None
            check_type(self.model, str(model.config.model_type))
            self.model_type = str(model.config.model_type)
            self._loaded = processor, model.to(self.device).eval()
        torch_threads()  # each request on the cores free now
        return self._loaded

    @property
    def dimension(self) -> int:
        """Length of the vectors, read from the model's config (loads it)."""
        with self._lock:
            config = self._load()[1].config
        return int(getattr(config, "projection_dim", None) or config.vision_config.hidden_size)

    def embed(self, request: EmbedRequest) -> EmbedResponse:
        texts = list(request.texts)
        if not texts:
            return EmbedResponse(vectors=np.zeros((0, self.dimension), np.float32))
        rows, tokens = [], 0
        with self._lock:
            processor, model = self._load()
            padding = SUPPORTED[str(self.model_type)]
            for i in range(0, len(texts), self.batch):
                batch = texts[i : i + self.batch]
                inputs = processor.tokenizer(
                    batch, padding=padding, truncation=True, return_tensors="pt"
                )
                mask = inputs.get("attention_mask")
                tokens += int(mask.sum()) if mask is not None else int(inputs["input_ids"].numel())
                rows.append(_features(model.get_text_features, inputs.to(self.device)))
        return EmbedResponse(
            vectors=unit_rows(np.concatenate(rows)), usage=Usage(input_tokens=tokens)
        )

    def embed_images(self, images: list[np.ndarray]) -> np.ndarray:
        if not images:
            return np.zeros((0, self.dimension), np.float32)
        from PIL import Image

        rows, n = [], self.batch
        with self._lock:
            processor, model = self._load()
            for i in range(0, len(images), n):
                batch = [Image.fromarray(np.ascontiguousarray(rgb)) for rgb in images[i : i + n]]
                inputs = processor.image_processor(images=batch, return_tensors="pt")
                rows.append(_features(model.get_image_features, inputs.to(self.device)))
        return unit_rows(np.concatenate(rows))

    def close(self) -> None:
        with self._lock:
            self._loaded = None


def _features(tower: Any, inputs: Any) -> np.ndarray:
    """A tower's projected features, (B, D) float32. transformers 5 returns an output whose
    ``pooler_output`` holds them; 4.x returns the tensor itself."""
    import torch

    with torch.inference_mode():
        out = tower(**inputs)
    tensor = out if isinstance(out, torch.Tensor) else out.pooler_output
    return tensor.float().cpu().numpy()
