"""Open-vocabulary detection with transformers: OWL-ViT, OWLv2 or Grounding DINO, local weights.

``transformers:<dir>`` loads a zero-shot object detection model and its processor saved in
``<dir>`` by ``save_pretrained`` (or downloaded there, e.g. ``huggingface-cli download
google/owlv2-base-patch16-ensemble --local-dir <dir>``). Nothing is fetched at run time: a path
that is not such a directory is a ConfigError when the role is created. Supported
``model_type`` values in its ``config.json``: :data:`SUPPORTED`. Needs ``pip install
'vidagent[detect]'`` (transformers and torch, imported on first use; without torchvision
transformers falls back to its PIL image processors).

It fills the ``detector`` role with an open vocabulary: the tools pass the names the model asked
for, and every detection is labelled with one of those names exactly as given. Callers that
name nothing (the detect stage of ``vidagent index``, the perception describer) get
``labels``. Options:

* ``labels``: comma-separated names looked for when none are given; default :data:`COCO`, the
  80 classes YOLO (VideoAgent2's detector) finds.
* ``threshold``: lowest score kept (default 0.1, the OWL post-processing's own default; the
  tools then apply their ``detect_threshold``).
* ``nms``: of two boxes of one label overlapping more than this IoU the lesser goes (default
  0.5): OWL predicts a box per image patch and keeps near-duplicates.
* ``max_detections``: per frame, most confident first (default 50).
* ``device``: the torch device (default ``cpu``); ``batch_size``: frames per forward pass
  (default 4).

How a box gets its label and score:

* OWL-ViT / OWLv2: one text query per name; a box takes the query scoring highest, its score the
  sigmoid of that logit (the processor's ``post_process_grounded_object_detection``). OWLv2
  pads frames to a square; the post-processing scales boxes by the long side accordingly.
* Grounding DINO: names are joined into one prompt, ``"a cat. a dog."``, in as many passes as
  the text length (``max_text_len``) needs. Its post-processing decodes the tokens over a
  threshold into phrases, which can merge two names or keep half of one; here instead a box's
  score for a name is the highest probability over that name's tokens (the same per-token
  sigmoid that post-processing thresholds) and it takes the best-scoring name.

Scores are in ``[0, 1]`` but are not calibrated like the HOG/Haar ones: a model whose correct
boxes score under the tools' default ``detect_threshold`` (0.5) wants a lower one
(``PerceptionOptions.detect_threshold``). Boxes are clipped to the frame; boxes under a pixel
wide or high after clipping are dropped.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vidagent.exceptions import BackendMissingError, ConfigError
from vidagent.geometry import box_iou
from vidagent.models.base import Adapter, BackendStatus, Capabilities, Detection
from vidagent.models.cpu import quiet_openmp, torch_threads
from vidagent.models.registry import module_available

if TYPE_CHECKING:
    from vidagent.config import Settings

#: model_type in config.json -> how its outputs are read.
SUPPORTED = {
    "owlvit": "owl",
    "owlv2": "owl",
    "grounding-dino": "grounding",
    "mm-grounding-dino": "grounding",
}
_COCO = (
    "person,bicycle,car,motorcycle,airplane,bus,train,truck,boat,traffic light,fire hydrant,"
    "stop sign,parking meter,bench,bird,cat,dog,horse,sheep,cow,elephant,bear,zebra,giraffe,"
    "backpack,umbrella,handbag,tie,suitcase,frisbee,skis,snowboard,sports ball,kite,"
    "baseball bat,baseball glove,skateboard,surfboard,tennis racket,bottle,wine glass,cup,fork,"
    "knife,spoon,bowl,banana,apple,sandwich,orange,broccoli,carrot,hot dog,pizza,donut,cake,"
    "chair,couch,potted plant,bed,dining table,toilet,tv,laptop,mouse,remote,keyboard,"
    "cell phone,microwave,oven,toaster,sink,refrigerator,book,clock,vase,scissors,teddy bear,"
    "hair drier,toothbrush"
)
#: The COCO classes, what YOLO detects: the names looked for when a caller gives none.
COCO = tuple(_COCO.split(","))


def model_family(model: str) -> tuple[Path, str]:
    """The model directory and its family (``owl`` or ``grounding``), read from config.json.

    Raises:
        ConfigError: no such directory, no config.json, or a model type not supported.
    """
    path = Path(model).expanduser()
    config = path / "config.json"
    if not config.is_file():
        raise ConfigError(
            f"transformers detector {model!r}: not a model directory (no config.json); give the "
            "directory the weights were saved or downloaded to, e.g. huggingface-cli download "
            "google/owlv2-base-patch16-ensemble --local-dir DIR"
        )
    try:
        model_type = json.loads(config.read_text(encoding="utf-8")).get("model_type", "")
    except (OSError, ValueError, AttributeError) as e:
        raise ConfigError(
            f"transformers detector {model!r}: unreadable config.json ({e})"
        ) from None
    if model_type not in SUPPORTED:
        raise ConfigError(
            f"transformers detector {model!r} is a {model_type or 'untyped'!r} model; "
            f"zero-shot detectors supported: {', '.join(SUPPORTED)}"
        )
    return path, SUPPORTED[model_type]


def status(model: str, options: dict[str, str], settings: Settings) -> BackendStatus:
    if not module_available("transformers") or not module_available("torch"):
        return BackendStatus(
            model, False, "transformers or torch missing: pip install 'vidagent[detect]'"
        )
    try:
        _, family = model_family(model)
    except ConfigError as e:
        return BackendStatus(model, False, str(e))
    return BackendStatus(model, True, f"transformers zero-shot detection ({family}), local")


class TransformersDetector(Adapter):
    """An open-vocabulary detector from a local transformers checkpoint."""

    provider = "transformers"
    capabilities = Capabilities(roles=frozenset({"detector"}), batch_size=4, local=True)

    def __init__(self, model: str, options: dict[str, str] | None = None) -> None:
        super().__init__(model, options)
        self.path, self.family = model_family(model)
        given = [name.strip() for name in self.options.get("labels", "").split(",")]
        self.labels = [name for name in given if name] or list(COCO)
        self.threshold = self.number("threshold", 0.1, whole=False)
        self.nms = self.number("nms", 0.5, whole=False)
        self.max_detections = self.number("max_detections", 50, minimum=1)
        self.batch = self.number("batch_size", 4, minimum=1)
        self.device = self.options.get("device", "cpu")
        self._loaded: tuple[Any, Any] | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_settings(
        cls, model: str, options: dict[str, str], settings: Settings
    ) -> TransformersDetector:
        return cls(model, options)

    def _load(self) -> tuple[Any, Any]:
        if self._loaded is None:
            quiet_openmp()  # before torch's OpenMP runtime loads
            try:
                import torch  # noqa: F401  - transformers models need it
                from transformers import AutoModelForZeroShotObjectDetection, AutoProcessor
            except ImportError:
                raise BackendMissingError("transformers with torch", "detect") from None
            try:
                processor = AutoProcessor.from_pretrained(self.path, local_files_only=True)
                model = AutoModelForZeroShotObjectDetection.from_pretrained(
                    self.path, local_files_only=True
                )
            except (OSError, ValueError) as e:
                raise ConfigError(
                    f"transformers detector {self.model!r}: cannot load the model and its "
                    f"processor ({str(e).splitlines()[0]}); save both there with save_pretrained"
                ) from None
            self._loaded = processor, model.to(self.device).eval()
        torch_threads()  # each request on the cores free now
        return self._loaded

    def detect(
        self, images: list[np.ndarray], labels: Sequence[str] | None = None
    ) -> list[list[Detection]]:
        names = list(dict.fromkeys(n.strip() for n in labels or () if n.strip())) or self.labels
        found: list[list[Detection]] = []
        with self._lock:
            processor, model = self._load()
            for i in range(0, len(images), self.batch):
                batch = images[i : i + self.batch]  # each (H, W, 3) uint8 RGB
                if self.family == "owl":
                    raw = _owl(processor, model, batch, names, self.threshold, self.device)
                else:
                    raw = _grounding(processor, model, batch, names, self.threshold, self.device)
                found += [
                    self._tidy(ds, rgb.shape[:2]) for ds, rgb in zip(raw, batch, strict=False)
                ]
        return found

    def _tidy(self, found: list[Detection], shape: tuple[int, ...]) -> list[Detection]:
        """Clipped to a frame of ``shape`` (H, W), slivers dropped, duplicates suppressed, the
        best kept."""
        height, width = float(shape[0]), float(shape[1])
        kept: list[Detection] = []
        for d in sorted(found, key=lambda d: -d.score):
            x0, y0 = min(max(d.box[0], 0.0), width), min(max(d.box[1], 0.0), height)
            x1, y1 = min(max(d.box[2], 0.0), width), min(max(d.box[3], 0.0), height)
            if x1 - x0 < 1.0 or y1 - y0 < 1.0:
                continue
            box = (x0, y0, x1, y1)
            if all(k.label != d.label or box_iou(k.box, box) <= self.nms for k in kept):
                kept.append(Detection(d.label, box, min(max(d.score, 0.0), 1.0)))
            if len(kept) == self.max_detections:
                break
        return kept


def _pil(images: Sequence[np.ndarray]) -> list[Any]:
    from PIL import Image

    return [Image.fromarray(np.ascontiguousarray(rgb)) for rgb in images]


def _owl(
    processor: Any,
    model: Any,
    images: Sequence[np.ndarray],
    names: list[str],
    threshold: float,
    device: str,
) -> list[list[Detection]]:
    """Detections per image, in pixels of that image, before clipping and suppression."""
    import torch

    text = [names] * len(images)
    inputs = processor(text=text, images=_pil(images), return_tensors="pt", truncation=True)
    with torch.inference_mode():
        outputs = model(**inputs.to(device))
    sizes = [rgb.shape[:2] for rgb in images]  # (height, width), as the processor wants
    results = processor.post_process_grounded_object_detection(
        outputs, threshold=threshold, target_sizes=sizes
    )
    found: list[list[Detection]] = []
    for r in results:
        rows = zip(r["boxes"].tolist(), r["scores"].tolist(), r["labels"].tolist(), strict=False)
        found.append([Detection(names[k], (x0, y0, x1, y1), s) for (x0, y0, x1, y1), s, k in rows])
    return found


def _grounding(
    processor: Any,
    model: Any,
    images: Sequence[np.ndarray],
    names: list[str],
    threshold: float,
    device: str,
) -> list[list[Detection]]:
    """Detections per image over as many prompts as the names need (see the module docstring)."""
    import torch

    found: list[list[Detection]] = [[] for _ in images]
    tokenizer = processor.tokenizer
    pieces = [tokenizer(n.lower(), add_special_tokens=False)["input_ids"] for n in names]
    for chunk in _prompts(pieces, int(getattr(model.config, "max_text_len", 256)) - 2):
        asked = [names[j].lower() for j in chunk]
        inputs = processor(images=_pil(images), text=[asked] * len(images), return_tensors="pt")
        with torch.inference_mode():
            outputs = model(**inputs.to(device))
        probs = outputs.logits.sigmoid().cpu()  # (B, Q, max_text_len)
        boxes = outputs.pred_boxes.cpu()  # (B, Q, 4) centre x, centre y, w, h as fractions
        for b, rgb in enumerate(images):
            row = inputs["input_ids"][b].tolist()
            spans = _spans(row, [pieces[j] for j in chunk])
            per_name = torch.stack(
                [
                    probs[b, :, s.start : s.stop].max(-1).values
                    if s
                    else torch.zeros(probs.shape[1])
                    for s in spans
                ],
                dim=-1,
            )  # (Q, len(chunk))
            score, best = per_name.max(-1)
            h, w = rgb.shape[:2]
            for q in torch.nonzero(score >= threshold).flatten().tolist():
                cx, cy, bw, bh = boxes[b, q].tolist()
                box = ((cx - bw / 2) * w, (cy - bh / 2) * h, (cx + bw / 2) * w, (cy + bh / 2) * h)
                found[b].append(Detection(names[chunk[int(best[q])]], box, float(score[q])))
    return found


def _prompts(pieces: list[list[int]], budget: int) -> list[list[int]]:
    """Indices of names grouped so that each group's tokens and separators fit ``budget``."""
    groups: list[list[int]] = [[]]
    used = 0
    for j, ids in enumerate(pieces):
        cost = len(ids) + 1  # the name and its "."
        if groups[-1] and used + cost > budget:
            groups.append([])
            used = 0
        groups[-1].append(j)
        used += cost
    return [g for g in groups if g]


def _spans(row: list[int], pieces: list[list[int]]) -> list[range | None]:
    """Where each name's tokens sit in a prompt's token ids, searched in order (None: absent)."""
    spans: list[range | None] = []
    at = 0
    for ids in pieces:
        hit = next(
            (s for s in range(at, len(row) - len(ids) + 1) if ids and row[s : s + len(ids)] == ids),
            None,
        )
        spans.append(None if hit is None else range(hit, hit + len(ids)))
        at = at if hit is None else hit + len(ids)
    return spans
