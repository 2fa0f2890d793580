"""Prompts as package data, one text file each, verbatim from the papers where they give one.

| file | source |
|---|---|
| ``dvd_caption_system.txt`` | Deep Video Discovery, Table 9, system prompt |
| ``dvd_caption.txt`` | Deep Video Discovery, Table 9, user prompt (typos kept: "timestampl", "phase") |
| ``videoagent2_summary.txt`` | VideoAgent2, Appendix B, prompt_Summary |
| ``videoagent2_caption.txt`` | VideoAgent2, Appendix A.1, image caption with per-clause confidence |
| ``videoagent2_answer.txt`` | VideoAgent2, Appendix B, prompt_Answer |
| ``videoagent2_create_plan.txt`` | VideoAgent2, Appendix B, prompt_CreatePlan |
| ``videoagent2_adjust_plan.txt`` | VideoAgent2, Appendix B, prompt_AdjustPlan |
| ``videoagent2_segment_caption.txt`` | not in the paper: a VLM's caption of one segment when VideoAgent2 builds its general context (LaViLa, the paper's captioner, takes no prompt) |
| ``dvd_agent_system.txt`` | Deep Video Discovery, Table 10, system prompt (its "codebase" sentence kept) |
| ``dvd_agent.txt`` | Deep Video Discovery, Table 10, user prompt (typos kept: "unkown", "prgressively") |
| ``dvd_frame_inspect_system.txt`` | Deep Video Discovery, Tables 11 and 12, system prompt |
| ``dvd_frame_inspect.txt`` | Deep Video Discovery, Table 11, user prompt |
| ``dvd_global_browse.txt`` | Deep Video Discovery, Table 12, user prompt |
| ``dvd_tools.json`` | Deep Video Discovery, Tables 13 and 14, the function schemas |
| ``eea_reward_first.txt`` | EEA, Table 7: the reward model, first round |
| ``eea_reward_next.txt`` | EEA, Table 8: the reward model, later rounds |
| ``eea_policy.txt`` | EEA, Table 9: the policy's selection ("Options:question" read as the options) |
| ``eea_query_discovery.txt`` | EEA, Table 10: semantic queries from the question |
| ``eea_query_update.txt`` | EEA, Table 11: new queries from the round's frames |
| ``avi_caption.txt`` | AVI, Fig. 7: a clip's caption and its own subject registry (line breaks put back where the spec's B.8.3 has them; the paper's garbled quotes kept) |
| ``vlm_boxes_system.txt``, ``vlm_boxes.txt`` | not in the papers: boxes of named objects asked of a vision model as JSON (``object_detector="vlm"``; the papers use YOLOv11 and Grounding DINO) |
| ``avi_graph.txt`` | AVI, Fig. 8: the entity-graph extractor's system prompt (line breaks put back where the spec's B.8.4 has them; the paper's garbled quotes kept) |
| ``avi_system.txt`` | AVI, Fig. 5: the system prompt's template (the figure's "Fig. 9/10–12/6" references left out: the code puts those figures there) |
| ``avi_core_protocol.txt`` | AVI, Fig. 9: the core protocol of every phase |
| ``avi_retrieve.txt``, ``avi_perceive.txt``, ``avi_review.txt`` | AVI, Figs. 10, 11 and 12: each phase's instruction |
| ``avi_tools.txt`` | AVI, Fig. 6: one line per tool, as the paper prints them (the strategy reads each tool's line out of it) |
| ``verify_vision.txt`` | not in the papers: a vision model asked whether each cited span's frames show the answer (:mod:`vidagent.agents.citations`) |
| ``critic.txt`` | not in the papers: the reader that says of each cited moment whether it answers the question, and whether it agrees with the answer (:mod:`vidagent.agents.critic`) |
| ``avi_global_explore.txt`` | not in the paper: global_explore_tool's query-focused summary over every caption (the paper names the tool only) |

EEA's tables lost their placeholders' braces in the paper's text: the files put them back
(``{duration}``, ``{segment_block}``) and break lines at the ``/* ... */`` headers; Table 9's "Options:question" typo reads
``{options}``. Nothing else changed.
Placeholders stay as the papers wrote them (``[TRANSCRIPTS]``, ``{C}``); the code that uses a
prompt fills them with plain string replacement, so braces in the templates need no escaping.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from importlib.resources import files
from typing import Any


@cache
def load_prompt(name: str) -> str:
    """The text of ``prompts/<name>.txt``."""
    return files("vidagent.prompts").joinpath(f"{name}.txt").read_text(encoding="utf-8")


@cache
def load_json(name: str) -> Any:
    """The parsed contents of ``prompts/<name>.json`` (tool schemas)."""
    text = files("vidagent.prompts").joinpath(f"{name}.json").read_text(encoding="utf-8")
    return json.loads(text)


def prompt_hash(name: str) -> str:
    """First 8 hex digits of the prompt's SHA-256, recorded with what it produced."""
    return hashlib.sha256(load_prompt(name).encode("utf-8")).hexdigest()[:8]
