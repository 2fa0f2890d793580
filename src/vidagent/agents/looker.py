"""One frame looker for everything that shows a model the frames of cited spans after a run:
the citation checker's vision pass and the critic. It owns the sampling (evenly inside each
span, fewer per span where the model takes fewer images) and the question's frame budget, so
both are counted the same way and neither can skip the limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vidagent.budget import BudgetExceeded

if TYPE_CHECKING:
    from vidagent.budget import Meter
    from vidagent.models.base import ImagePart
    from vidagent.models.client import Client
    from vidagent.tools.base import Evidence
    from vidagent.tools.index import IndexView

#: Frames of each span shown, at most.
FRAMES_PER_SPAN = 2
#: The size frames are decoded at for a looker's call (longest side, pixels).
FRAME_SIZE = 512


def vision_model(client: Client) -> bool:
    """Whether ``client`` (the ``tool_vlm`` role's) is a configured vision model: it takes
    images, is not the perception describer, and is not a test's scripted model."""
    caps = client.capabilities
    return caps.supports_images and not caps.describer and not caps.scripted


@dataclass
class FrameLooker:
    """Shows ``client`` the frames of cited spans, within the question's frame budget.

    Args:
        client: the model shown the frames (``tool_vlm``, or a text reader: then no frames).
        index: where the frames are decoded from.
        meter: the question's meter; the frames shown are added to it.
        frame_limit: the question's frame budget (None: no limit).
    """

    client: Client
    index: IndexView
    meter: Meter
    frame_limit: int | None = None

    @property
    def sees(self) -> bool:
        """Whether the model takes images (a text-only reader is shown the quotes alone)."""
        return self.client.capabilities.supports_images

    def per_span(self, spans: int) -> int:
        """Frames shown per span: :data:`FRAMES_PER_SPAN`, fewer where the model's image limit
        cannot hold that many for every span (at least one)."""
        limit = self.client.capabilities.max_images
        if not self.sees or not spans:
            return 0
        if limit:
            return max(1, min(FRAMES_PER_SPAN, limit // spans))
        return FRAMES_PER_SPAN

    def content(self, spans: Sequence[Evidence], header: str) -> list[str | ImagePart]:
        """Each span's header (``header.format(n=…, t0=…, t1=…)``) followed by its frames,
        the frames counted on the meter.

        Raises:
            Stopped: the caller asked the run to stop.
            BudgetExceeded: a budget is spent, or the frames would pass the frame budget.
            MediaError: a frame could not be decoded.
        """
        self.meter.check()
        per = self.per_span(len(spans))
        if self.frame_limit is not None and self.meter.frames + per * len(spans) > self.frame_limit:
            raise BudgetExceeded("frames", self.meter.frames, self.frame_limit)
        content: list[str | ImagePart] = []
        for n, s in enumerate(spans, 1):
            content.append(header.format(n=n, t0=s.t0, t1=s.t1))
            if per:
                times = [s.t0 + (s.t1 - s.t0) * (i + 0.5) / per for i in range(per)]
                content += self.index.frame_images(s.video_id, times, size=FRAME_SIZE)
        self.meter.frames += per * len(spans)
        return content
