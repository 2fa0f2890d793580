"""EEA (Exploration-Exploitation Agent): a semantic-guided tree search over video segments that
answers from few frames (spec ``videoagent2-eea.md`` part B; paper ``eea.txt``).

Algorithm 1, each round: (i) **Semantic-Guided Expansion** splits the selected segment at B
frames, its top-B_s semantic anchors plus frames that minimise the longest unobserved gap
(:func:`~.tree.coverage_sample`), into B + 1 children; (ii) the **reward model** scores each
child 0-100 with an explanation (Table 7 in round 1, Table 8 after, with every earlier score);
each child's **query score** u is the log-mean-exp (tau_c = 0.1) of the anchors inside it;
(iii) **Uncertainty-Aware Reward Fusion** sets h = (1 - H) r + H u over every leaf, H the
normalised entropy of softmax(r); the memory buffer takes the round's frames and evicts the
lowest-reward ones; **Dynamic Query Management** extracts new queries from the round's frames
(Table 11), retrieves for them alone and re-clusters the anchors; (iv) the **policy** sees the
memory frames and every leaf with its h and explanation (Table 9) and either names a segment
(any leaf: backtracking and branching are allowed) or answers. Queries start from the question
(Table 10), retrieved and clustered into anchors before round 1.

Models: the paper uses one VLM (GPT-4o) as reward model, policy and query writer: here the
``tool_vlm`` role (it follows ``vlm``), at the paper's temperature 0.5. With the perception
describer as that role (the offline default), the text-only query discovery goes to the ``llm``
role directly, since the describer would only forward it there. Replies from a local model are
constrained by a JSON schema; remote models get the prompts alone, as published.

Retrieval (:mod:`.retrieval`): frames embedded by an ``image_embed`` model when one is
configured, else the index's clip vectors; the trace says which (``retrieval`` of each round).
Clip vectors are text (captions, speech, on-screen text), so that fallback captions every clip
at index time, the preprocessing the paper exists to avoid: the index plan's note says so in
one line, which the trace's first event records and ``ask`` shows under the question.

Decisions where the paper is silent (spec B.11 numbers; each is an option unless noted):

- #1-2: top-``top_k`` = 10 clips per query; clusters merge clips touching within
  ``cluster_gap`` = 1 s; an anchor is its cluster's best clip's frame.
- #3: the entropy's softmax runs on r / ``entropy_temperature``, 10 reward points (the paper's
  tau_c = 0.1 applied to r / 100): a clear winner gives H near 0 and ties H near 1 (Fig. 4's
  two modes), and a 5-point margin stays uncertain, so a segment the reward model scored 0 is
  still ranked by its query score (Fig. 5). The spec's temperature 1 on raw rewards
  (``entropy_temperature=1``) gives H near 0 for any 5-point margin: h = r almost always, and
  UARF no different from ``fusion="r"`` (:func:`~.tree.entropy`).
- #4: h fuses r / 100 with u of similarities min-max normalised over D (``fusion_scale="unit"``);
  ``raw`` fuses the literal numbers.
- #5: u of a segment without anchors is 0; u is computed when the child is made and kept
  (Algorithm 1), or refreshed from the current anchors every round (``recompute_u``).
- #7: anchors already observed or on a boundary are skipped; missing ones are filled by coverage.
- #8: a segment without unobserved interior frames cannot be expanded; the policy naming one is
  redirected to the expandable leaf of highest h; when none is left the answer is forced.
- #9: at most ``--max-steps`` rounds (10) or ``max_frames`` observed frames (64; the last round
  takes only what is left); then Table 9 with one more line asks for the answer from the
  memory (a forced answer, recorded).
- #10: the reward model sees the round's frames and, when observed before, the parent's two
  boundary frames (``boundary_frames``); every image is labelled with its time.
- #11: a memory frame scores the larger reward of the two children it separates.
- #12: labels are global node ids; the history block holds every earlier reward.
- #13: the query update runs every round, even the one the policy then answers in; new queries
  are deduplicated case-insensitively against all earlier ones.
- #14: frames are sent at most ``image_side`` = 768 px on their long side, one image each; a
  model that takes fewer images (``max_images``) than B or the memory size lowers both to it.
- #15: for a question without options the options are left empty and Table 9's last sentence
  asks to "answer concisely" instead of selecting from the options.
- #16: B = 6 and a memory of 16 for long videos (LVBench, Video-MME long), B = 4 and 8 for short
  ones (EgoSchema, MMBench-Video): ``profile="auto"`` picks long when the videos last more than
  ``long_seconds`` (600 s) in all.
- Table 9 asks for ``{Segment: int}`` but shows ``{"Segment": int}``; both are read. Its
  "Options:question" typo is read as the options.
- A reward reply with no score for any child is asked again once (``reward_retries``), then
  every child scores 0; a policy reply naming neither a leaf nor an answer is asked again once,
  then the leaf of highest h is expanded.

Many videos (one question over several): a forest, one root per video. Round 1 splits the roots
together: the B frames go where the longest gaps are over all videos (the anchors first), each
video's share cutting it into children; from then on the search is one candidate set over every
video, and prompts name each segment's video.

Ablations (paper Table 3, Fig. 6): ``anchor_budget=0`` is "w/o SGE" (uniform splitting);
``fusion="r"`` is "w/o UARF" (h = r); ``query_update=False`` is "w/o QU" (queries and anchors
fixed after round 0); ``queries=False`` drops Dynamic Query Management altogether (no
retrieval, u = 0); ``anchor_budget`` sweeps B_s; ``recompute_u`` refreshes stale query scores.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from vidagent.agents.answer import format_options
from vidagent.agents.base import Agent, Answer, IndexPlan, Question
from vidagent.agents.eea.replies import (
    answer_text,
    parse_policy,
    parse_rewards,
    policy_schema,
    reward_schema,
    string_list,
)
from vidagent.agents.eea.retrieval import (
    Retriever,
    image_embed_configured,
    last_frame,
    make_retriever,
)
from vidagent.agents.eea.tree import (
    ENTROPY_TEMPERATURE,
    Anchor,
    MemoryFrame,
    Node,
    RetrievedClip,
    anchor_phis,
    cluster_anchors,
    coverage_sample,
    dedup_clips,
    fuse,
    normalise_queries,
    query_score,
    select_anchors,
    update_memory,
)
from vidagent.exceptions import ConfigError
from vidagent.models.base import ImagePart, Message
from vidagent.prompts import load_prompt
from vidagent.tools.base import Evidence
from vidagent.trace import FormatError, SearchRound

if TYPE_CHECKING:
    from vidagent.agents.run import Run

Frame = tuple[str, int]  # (video_id, frame index = second)

MC_TAIL = "select the best answer from the options and directly provide the answer without giving any explanation."
OPEN_TAIL = "answer concisely."
FORCE = "You must answer now: {how}"
REWARD_AGAIN = (
    'Your reply gave no score. Reply only with JSON in the format {"Segment #": '
    '{"explanation": str, "score": int}}, one entry per segment: '
)
POLICY_AGAIN = (
    'Your reply named neither a segment nor an answer. Reply with {"Segment": int} to explore '
    "a segment, or with the answer."
)
LOCAL_REPLY = 1024  # tokens; a local model's cap per reply (a runaway explanation)
#: A query's characters in a local model's grammar: Tables 10 and 11 ask for 6-12 and fewer
#: than 10 words; unbounded, SmolLM2 wrote one query to the 1,024-token cap (59 s on 2 cores).
QUERY_CHARS = 160
CLIP_STAGES = ("transcribe", "read_text", "detect", "caption", "embed")  # what clip vectors read


@dataclass(frozen=True)
class EEAOptions:
    """Settings of the EEA strategy; defaults follow the paper (spec B.5).

    Attributes:
        profile: ``long`` (B = 6, memory 16: LVBench), ``short`` (B = 4, memory 8: EgoSchema),
            or ``auto`` (long when the videos last more than ``long_seconds`` in all).
        long_seconds: the ``auto`` profile's threshold.
        frames_per_round: B, frames sampled per expansion (None: the profile's).
        anchor_budget: B_s, semantic anchors among them (3; 0: uniform splitting, "w/o SGE").
        memory_size: frames kept in the memory buffer (None: the profile's).
        tau: tau_c, the query score's temperature.
        temperature: sampling temperature of every model call.
        entropy_temperature: the softmax temperature of the entropy, in reward points. 10
            is a gap-fill of ours, not the paper's (section 3.2 gives the entropy none; its
            tau_c = 0.1 is the query score's): under it Fig. 5's rescue can happen. 1 is the
            paper as written, the raw 0-100 rewards (docs/reproducing.md).
        fusion: ``uarf`` (h = (1 - H) r + H u) or ``r`` (h = r, "w/o UARF").
        fusion_scale: ``unit`` (r / 100 with normalised similarities) or ``raw``.
        recompute_u: refresh every candidate's u from the current anchors each round.
        queries: Dynamic Query Management on (False: no retrieval, u = 0).
        query_update: extract new queries from each round's frames (False: "w/o QU").
        retriever: ``auto``, ``frames`` (image_embed) or ``clips`` (the index's clip vectors).
        top_k: clips retrieved per query.
        cluster_gap: seconds within which retrieved clips merge into one anchor cluster.
        max_frames: observed frames after which the answer is forced.
        boundary_frames: also show the reward model the parent's boundary frames.
        image_side: frames are sent at most this many pixels on their long side.
        reward_retries: times a reward reply without scores is asked again.
    """

    profile: Literal["auto", "long", "short"] = "auto"
    long_seconds: float = 600.0
    frames_per_round: int | None = None
    anchor_budget: int = 3
    memory_size: int | None = None
    tau: float = 0.1
    temperature: float = 0.5
    entropy_temperature: float = ENTROPY_TEMPERATURE
    fusion: Literal["uarf", "r"] = "uarf"
    fusion_scale: Literal["unit", "raw"] = "unit"
    recompute_u: bool = False
    queries: bool = True
    query_update: bool = True
    retriever: Literal["auto", "frames", "clips"] = "auto"
    top_k: int = 10
    cluster_gap: float = 1.0
    max_frames: int = 64
    boundary_frames: bool = True
    image_side: int = 768
    reward_retries: int = 1

    def __post_init__(self) -> None:
        checks = {
            "frames_per_round must be at least 1": (self.frames_per_round or 1) >= 1,
            "anchor_budget must be 0 or more": self.anchor_budget >= 0,
            "memory_size must be at least 1": (self.memory_size or 1) >= 1,
            "tau and entropy_temperature must be positive": min(self.tau, self.entropy_temperature)
            > 0,
            "top_k and max_frames must be at least 1": min(self.top_k, self.max_frames) >= 1,
            "reward_retries must be 0 or more": self.reward_retries >= 0,
        }
        for problem, ok in checks.items():
            if not ok:
                raise ConfigError(f"eea: {problem} (set it with --set key=value)")


@dataclass
class _Search:
    """One question's search state (spec B.8)."""

    budget: int  # B
    capacity: int  # memory size
    names: dict[str, str]
    nodes: dict[int, Node] = field(default_factory=dict)
    leaves: list[int] = field(default_factory=list)
    memory: list[MemoryFrame] = field(default_factory=list)
    history: list[int] = field(default_factory=list)  # H_r: node ids, in the order rewarded
    queries: list[str] = field(default_factory=list)
    clips: list[RetrievedClip] = field(default_factory=list)
    anchors: list[Anchor] = field(default_factory=list)
    observed: set[Frame] = field(default_factory=set)
    images: dict[Frame, ImagePart] = field(default_factory=dict)
    retriever: Retriever | None = None
    searched: int = 0  # queries retrieved for
    entropy: float = 0.0
    max_images: int = 10**6  # the model's image limit

    def node(self, vid: str, start: int, end: int, parent: Node | None, round_: int) -> Node:
        made = Node(
            len(self.nodes),
            vid,
            start,
            end,
            parent.id if parent else None,
            parent.depth + 1 if parent else 0,
            round_,
        )
        self.nodes[made.id] = made
        if parent is not None:
            parent.children.append(made.id)
        return made

    def candidates(self) -> list[Node]:
        return [self.nodes[i] for i in self.leaves]

    def expandable(self, node: Node) -> bool:
        return node.interior(self.observed) > 0


class EEAAgent(Agent):
    """EEA; its options are :class:`EEAOptions`; rounds are steps (``--max-steps``, 10)."""

    name = "eea"
    max_steps = 10  # spec B.11 #9: the paper loops until the policy answers
    Options = EEAOptions
    options: EEAOptions

    def index_plan(self) -> IndexPlan:
        """EEA does no dense captioning: with an ``image_embed`` model it needs frame vectors
        alone; otherwise its retriever reads the index's clip vectors (captions, speech and
        on-screen text, embedded), which costs a caption of every clip, and the plan's note
        says so in one line; without queries nothing beyond the video's structure."""
        o = self.options
        if not o.queries:
            return IndexPlan(())
        frames = o.retriever == "frames" or (
            o.retriever == "auto" and image_embed_configured(self.models)
        )
        if frames:
            return IndexPlan(("embed_frames",))
        return IndexPlan(CLIP_STAGES, note=self.text_search_note())

    def text_search_note(self) -> str:
        """What searching text vectors instead of frames costs, in one line."""
        seconds = self.models.settings.clip_seconds
        why = (
            "retriever=clips"
            if self.options.retriever == "clips"
            else "no image_embed model (--image-embed)"
        )
        return (
            f"eea searches the index's text vectors (captions, speech, on-screen text), not "
            f"frames ({why}): every {seconds:g} s clip not yet indexed is captioned first, one "
            f"captioner call each ({3600 / seconds:.0f} an hour of video), the dense captioning "
            f"the paper avoids; --image-embed clip:DIR embeds frames instead"
        )

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "tool_mode": None}

    # -- the loop (Algorithm 1) -------------------------------------------------------------------

    def solve(self, run: Run) -> Answer:
        st = run.state = self.start(run)
        selected = [st.nodes[i] for i in st.leaves]  # s* = V: the root, or a forest's roots
        for rnd in run.steps():
            if run.meter.frames >= self.options.max_frames:
                return self.force_answer(run, "max_frames")
            selected = [n for n in selected if st.expandable(n)]
            if not selected:
                return self.force_answer(run, "exhausted", "no segment has unobserved frames left")
            record = self.round(run, rnd, selected)
            choice = record["choice"]
            if "forced" in choice:  # nothing left to explore
                return run.answer(choice["answer"], forced=True, reason=choice["forced"])
            if "answer" in choice:
                return run.answer(choice["answer"])
            selected = [st.nodes[choice["segment"]]]
        return self.force_answer(run, "max_steps")

    def start(self, run: Run) -> _Search:
        """Lines 1-6: the roots, QueryDiscovery and the initial anchors."""
        o = self.options
        videos = {v: self.index.video(v) for v in run.question.video_ids}
        total = sum(r.duration for r in videos.values())
        long = o.profile == "long" or (o.profile == "auto" and total > o.long_seconds)
        # A model that takes fewer images than B or the memory gets no more than it takes.
        limit = self.models.client("tool_vlm").capabilities.max_images or 10**6
        st = _Search(
            budget=min(limit, o.frames_per_round or (6 if long else 4)),
            capacity=min(limit, o.memory_size or (16 if long else 8)),
            names={v: r.name for v, r in videos.items()},
            max_images=limit,
        )
        for vid, record in videos.items():
            last = last_frame(record.duration)
            first = min(last, math.ceil(self.index.span(vid)[0]))  # a question's window
            st.leaves.append(st.node(vid, first, last, None, 0).id)
        if o.queries:
            st.retriever = make_retriever(o.retriever, self.index, self.models, list(videos))
            st.queries = self.discover_queries(run)
            self.retrieve(st, st.queries)
        run.phase(
            "queries",
            queries=list(st.queries),
            anchors=[a.to_dict() for a in st.anchors],
            retriever=st.retriever.name if st.retriever else None,
            frames_per_round=st.budget,
            memory_size=st.capacity,
        )
        return st

    def round(self, run: Run, rnd: int, selected: list[Node]) -> dict[str, Any]:
        """One round: expansion, evaluation, fusion, memory, query update, selection."""
        st, o = run.state, self.options
        st_before = len(st.leaves)
        # (i) Expansion: SGE over the selected node (a forest's first round: every root)
        picks = [
            a for n in selected for a in select_anchors(n, st.anchors, o.anchor_budget, st.observed)
        ]
        picks = sorted(picks, key=lambda a: (-a.phi, a.t))[: o.anchor_budget]
        gaps = [(n.video_id, n.start, n.end) for n in selected]
        budget = min(st.budget, o.max_frames - run.meter.frames)  # never past max_frames
        frames, spans = coverage_sample(
            gaps, [(a.video_id, a.t) for a in picks], budget, st.observed
        )
        children = []
        for vid, a, b in spans:
            parent = next(n for n in selected if n.video_id == vid and n.start <= a and b <= n.end)
            children.append(st.node(vid, a, b, parent, rnd))
        for n in selected:
            n.expanded = True
        self.load_frames(st, frames)
        st.observed |= set(frames)
        run.meter.frames += len(frames)
        # (ii) Evaluation: intrinsic reward, query score
        self.reward(run, rnd, selected, frames, children, st_before)
        for c in children:
            c.u = query_score(anchor_phis(c, st.anchors, raw=o.fusion_scale == "raw"), o.tau)
        split = {n.id for n in selected}
        st.leaves = [i for i in st.leaves if i not in split] + [c.id for c in children]
        st.history += [c.id for c in children]
        # UARF over every candidate (before the query update, as Algorithm 1 orders it)
        if o.recompute_u:
            for c in st.candidates():
                c.u = query_score(anchor_phis(c, st.anchors, raw=o.fusion_scale == "raw"), o.tau)
        st.entropy = fuse(
            st.candidates(), temperature=o.entropy_temperature, mode=o.fusion, scale=o.fusion_scale
        )
        st.memory = update_memory(st.memory, frames, children, st.capacity, rnd)
        # DQM update
        new: list[str] = []
        if o.queries and o.query_update:
            new = self.update_queries(run, frames)
            st.queries += new
            self.retrieve(st, new)
        # (iii) Selection
        record: dict[str, Any] = {"choice": {}}
        try:
            record["choice"] = self.select(run)
        finally:
            run.emit(
                SearchRound,
                round=rnd,
                expanded=[n.to_dict() for n in selected],
                frames=[[v, t] for v, t in frames],
                anchor_frames=[
                    [a.video_id, a.t] for a in picks if (a.video_id, a.t) in set(frames)
                ],
                children=[c.to_dict() for c in children],
                entropy=round(st.entropy, 4),
                candidates=[c.to_dict() for c in st.candidates()],
                new_queries=new,
                queries=list(st.queries),
                anchors=[a.to_dict() for a in st.anchors],
                memory=[[m.video_id, m.t, m.score] for m in st.memory],
                choice=record["choice"],
                retrieval={
                    "retriever": st.retriever.name if st.retriever else None,
                    "queries": st.searched,
                    "clips": len(st.clips),
                },
            )
        return record

    # -- Dynamic Query Management --------------------------------------------------------------

    def discover_queries(self, run: Run) -> list[str]:
        """C_0 = QueryDiscovery(q): Table 10."""
        prompt = self._fill("eea_query_discovery", run.question)
        query = {"type": "string", "maxLength": QUERY_CHARS}
        schema = {"type": "array", "items": query, "minItems": 1, "maxItems": 5}
        reply = self._call(run, [prompt], schema, role=self._text_role())
        queries = normalise_queries(string_list(reply))
        if not queries:  # nothing usable: the question itself is a query
            run.emit(FormatError, attempt=1, problem="no queries in the reply", reply=reply)
            queries = normalise_queries([run.question.text])
        return queries

    def update_queries(self, run: Run, frames: Sequence[Frame]) -> list[str]:
        """Delta C_t = QueryUpdate(q, F_t, C_{t-1}): Table 11, from the round's frames only."""
        st = run.state
        prompt = (
            self._fill("eea_query_update", run.question)
            .replace("{time_of_frames}", ", ".join(f"{self._frame(st, f)}s" for f in frames))
            .replace("{history_queries}", json.dumps(st.queries, ensure_ascii=False))
        )
        query = {"type": "string", "maxLength": QUERY_CHARS}
        schema = {"type": "object", "additionalProperties": query, "maxProperties": 5}
        reply = self._call(run, [*self._images(st, frames), prompt], schema)
        return normalise_queries(string_list(reply), st.queries)

    def retrieve(self, st: _Search, queries: Sequence[str]) -> None:
        """Retrieve for ``queries`` alone, merge into D without duplicates, re-cluster anchors."""
        if st.retriever is None or not queries:
            return
        for q in queries:
            st.clips += st.retriever.search(q, self.options.top_k)
            st.searched += 1
        st.clips = dedup_clips(st.clips)
        st.anchors = cluster_anchors(st.clips, self.options.cluster_gap)

    # -- the reward model -------------------------------------------------------------------------

    def reward(
        self,
        run: Run,
        rnd: int,
        selected: list[Node],
        frames: list[Frame],
        children: list[Node],
        candidate_count: int,
    ) -> None:
        """Set r and the explanation of each child (Table 7 in round 1, Table 8 after)."""
        st = run.state
        segments = "\n".join(f"Segment {c.id}: {self._span(st, c)}" for c in children)
        block = ", ".join(self._frame(st, f) for f in frames)
        if rnd == 1:
            prompt = self._fill("eea_reward_first", run.question)
        else:
            history = "\n".join(
                f"Segment {n.id}: {self._span(st, n)}, score={n.r:g}, explanation={n.explanation}"
                for n in (st.nodes[i] for i in st.history)
            )
            prompt = self._fill("eea_reward_next", run.question)
            prompt = prompt.replace("{N}", str(len(frames)))
            prompt = prompt.replace("{historical_block}", f"\n{history}\n")
            prompt = prompt.replace("{candidate_count}", str(candidate_count))
            prompt = prompt.replace("{parent_label}", ", ".join(str(n.id) for n in selected))
        prompt = prompt.replace("{frame_number}", str(len(frames))).replace("{frame_block}", block)
        prompt = prompt.replace("{segment_number}", str(len(children)))
        prompt = prompt.replace("{segment_block}", segments if rnd == 1 else f"\n{segments}")
        shown = list(frames)
        if self.options.boundary_frames:
            ends = [(n.video_id, t) for n in selected for t in (n.start, n.end)]
            shown += [f for f in ends if f in st.images and f not in shown]
            shown = shown[: max(len(frames), st.max_images)]
        content: list[str | ImagePart] = [*self._images(st, sorted(shown)), prompt]
        schema = reward_schema([c.id for c in children])
        ids = {c.id for c in children}
        scores: dict[int, tuple[float, str]] = {}
        for attempt in range(self.options.reward_retries + 1):
            reply = self._call(run, content, schema, check=attempt == 0)
            scores = parse_rewards(reply, ids)
            if scores:
                break
            run.emit(
                FormatError,
                attempt=attempt + 1,
                problem="no segment score in the reply",
                reply=reply,
            )
            content = [*content, REWARD_AGAIN + ", ".join(f"Segment {i}" for i in sorted(ids))]
        for c in children:
            c.r, c.explanation = scores.get(c.id, (0.0, ""))

    # -- the policy -------------------------------------------------------------------------------

    def policy_prompt(self, run: Run, final: bool = False) -> str:
        """Table 9 over the current candidates and memory (``final``: the answer is required)."""
        st = run.state
        block = "\n".join(
            f"Segment {c.id}: span=[{self._span(st, c, bare=True)}], score={c.h:.3f}, "
            f"explanation={c.explanation}"
            for c in st.candidates()
        )
        prompt = self._fill("eea_policy", run.question)
        prompt = prompt.replace("{memory_count}", str(len(st.memory)))
        prompt = prompt.replace(
            "{memory_indices}", ", ".join(self._frame(st, (m.video_id, m.t)) for m in st.memory)
        )
        prompt = prompt.replace("{candidate_total}", str(len(st.leaves)))
        prompt = prompt.replace("{candidate_block}", block)
        if not run.question.options:
            prompt = prompt.replace(MC_TAIL, OPEN_TAIL)
        if final:
            prompt += "\n" + FORCE.format(how=MC_TAIL if run.question.options else OPEN_TAIL)
        return prompt

    def select(self, run: Run) -> dict[str, Any]:
        """Line 25: ``{"segment": id}`` to expand, or ``{"answer": text}``."""
        st, question = run.state, run.question
        content: list[str | ImagePart] = [*self._memory_images(st), self.policy_prompt(run)]
        schema = policy_schema(st.leaves, question.options)
        for attempt in range(2):
            reply = self._call(run, content, schema, check=attempt == 0)
            choice = parse_policy(reply, question.options)
            if choice is not None:
                break
            run.emit(
                FormatError,
                attempt=attempt + 1,
                problem="neither a segment nor an answer",
                reply=reply,
            )
            content = [*content, POLICY_AGAIN]
        else:
            choice = {"segment": -1}
        if "segment" in choice:
            node = st.nodes.get(choice["segment"])
            if node is None or node.id not in st.leaves or not st.expandable(node):
                best = self.best_leaf(st)
                if best is None:
                    return self.final(run, "exhausted")
                choice = {"segment": best.id, "redirected_from": choice["segment"]}
        self._set_evidence(run)
        return choice

    def best_leaf(self, st: _Search) -> Node | None:
        """The expandable leaf of highest h (ties: the earlier id)."""
        open_ = [c for c in st.candidates() if st.expandable(c)]
        return max(open_, key=lambda c: (c.h, -c.id)) if open_ else None

    def final(self, run: Run, reason: str) -> dict[str, Any]:
        """The policy's answer, required now: Table 9 plus one line."""
        st = run.state
        content: list[str | ImagePart] = [
            *self._memory_images(st),
            self.policy_prompt(run, final=True),
        ]
        schema = policy_schema([], run.question.options)
        reply = self._call(run, content, schema, check=False)
        choice = parse_policy(reply, run.question.options)
        text = choice["answer"] if choice and "answer" in choice else reply.strip()
        return {"answer": text, "forced": reason}

    def force_answer(self, run: Run, reason: str, note: str = "") -> Answer:
        """Spec B.11 #9: Table 9 with a line requiring the answer, over the memory."""
        if not isinstance(run.state, _Search):  # failed before the search began
            question = run.question
            prompt = f"{question.prompt}\n\n" + FORCE.format(
                how=MC_TAIL if question.options else OPEN_TAIL
            )
            reply = self._call(run, [prompt], policy_schema([], question.options), check=False)
            return run.answer(
                answer_text(reply, question.options), forced=True, reason=reason, note=note
            )
        self._set_evidence(run)
        answer = self.final(run, reason)["answer"]
        return run.answer(answer, forced=True, reason=reason, note=note)

    # -- helpers ----------------------------------------------------------------------------------

    def _text_role(self) -> str:
        describer = self.models.client("tool_vlm").capabilities.describer
        return "llm" if describer else "tool_vlm"

    def _call(
        self,
        run: Run,
        content: Sequence[str | ImagePart],
        schema: dict[str, Any] | None,
        *,
        role: str = "tool_vlm",
        check: bool = True,
    ) -> str:
        """One model call; the schema constrains local models only (remote ones get the
        paper's prompt alone)."""
        if check:
            run.meter.check()
        client = self.models.client(role)
        local = client.capabilities.local
        text_only = len(content) == 1 and isinstance(content[0], str)
        message = Message("user", content[0] if text_only else tuple(content))  # type: ignore[arg-type]
        past = contextlib.nullcontext() if check else run.meter.past_budgets()  # a final answer
        with run.active(), past:
            response = client.structured(
                [message],
                schema if local else None,
                max_tokens=LOCAL_REPLY if local else None,
                temperature=self.options.temperature,
            )
        return response.text

    def _fill(self, name: str, question: Question) -> str:
        options = format_options(question.options) if question.options else ""
        return (
            load_prompt(name)
            .strip()
            .replace("{question}", question.text)
            .replace("{options}", options)
            .replace("{duration}", f"{sum(self._durations(question)):g}")
        )

    def _durations(self, question: Question) -> list[float]:
        return [round(self.index.duration(v), 1) for v in question.video_ids]

    def _frame(self, st: _Search, f: Frame) -> str:
        return str(f[1]) if len(st.names) == 1 else f"{st.names[f[0]]} {f[1]}"

    def _span(self, st: _Search, n: Node, bare: bool = False) -> str:
        span = f"{n.start},{n.end}" if bare else f"[{n.start}s, {n.end}s]"
        return span if len(st.names) == 1 else f"{st.names[n.video_id]} {span}"

    def load_frames(self, st: _Search, frames: Sequence[Frame]) -> None:
        """Decode the frames not cached yet (1 s = one frame) at ``image_side``."""
        for vid in dict.fromkeys(v for v, _ in frames):
            wanted = [t for v, t in frames if v == vid and (v, t) not in st.images]
            if not wanted:
                continue
            times = [float(t) for t in wanted]
            images = self.index.frame_images(vid, times, size=self.options.image_side)
            st.images.update(((vid, t), image) for t, image in zip(wanted, images, strict=True))

    def _images(self, st: _Search, frames: Sequence[Frame]) -> list[str | ImagePart]:
        parts: list[str | ImagePart] = []
        for f in frames:
            parts += [f"Frame at {self._frame(st, f)}s", st.images[f]]
        return parts

    def _memory_images(self, st: _Search) -> list[str | ImagePart]:
        return self._images(st, [(m.video_id, m.t) for m in st.memory])

    def _set_evidence(self, run: Run) -> None:
        """The answer rests on the memory: its best frames, as instants."""
        best = sorted(run.state.memory, key=lambda m: -m.score)[:5]
        run.evidence = tuple(Evidence(m.video_id, float(m.t), float(m.t)) for m in best)
