"""Every prompt the papers print, pinned by a hash of the package file, and compared with the
paper's own text where it is beside the checkout (``../shared/papers``).

The hashes are what makes the verbatim check run everywhere: each was taken from a file that
matched its paper (the comparison below, run with the papers present), so a change to a paper
prompt fails here with or without the papers and must be deliberate. The papers' texts lost their
line breaks (and a few spaces), so the comparison ignores whitespace. EEA's five prompts are
pinned the same way in ``tests/agents/test_eea.py``.
"""

from __future__ import annotations

import hashlib
import re
from importlib.resources import files
from pathlib import Path

import pytest

PAPERS = Path(__file__).resolve().parents[3] / "shared" / "papers"

#: name -> (paper, first 16 hex digits of the file's SHA-256, whether the paper prints it whole).
#: ``avi_system`` is Fig. 5's template with its figure references left out (the code puts the
#: figures there), so only its hash is pinned; ``dvd_tools.json`` is Tables 13-14 as JSON
#: (``tests/agents/test_dvd_prompts.py`` checks it against the tools the agent offers).
PAPER_PROMPTS: dict[str, tuple[str, str, bool]] = {
    "dvd_caption_system.txt": ("dvd", "9db26da266bd0544", True),
    "dvd_caption.txt": ("dvd", "4434f8db2b574139", True),
    "dvd_agent_system.txt": ("dvd", "4d121c7635f9887e", True),
    "dvd_agent.txt": ("dvd", "873a2c2c26aa077f", True),
    "dvd_frame_inspect_system.txt": ("dvd", "3c3bba9d3bc2376c", True),
    "dvd_frame_inspect.txt": ("dvd", "3cb2abee6b6e9e42", True),
    "dvd_global_browse.txt": ("dvd", "b2d658704f6f9585", True),
    "dvd_tools.json": ("dvd", "67e2794e4ce3a2ba", False),
    "videoagent2_summary.txt": ("videoagent2", "d3d64043a68bffbe", True),
    "videoagent2_caption.txt": ("videoagent2", "02fdf7eb8dda3b0d", True),
    "videoagent2_answer.txt": ("videoagent2", "2c54382e15101e80", True),
    "videoagent2_create_plan.txt": ("videoagent2", "d5bf453d5c96ab6f", True),
    "videoagent2_adjust_plan.txt": ("videoagent2", "01741ba75382b10a", True),
    "avi_caption.txt": ("avi", "c09ed5ea735e526f", True),
    "avi_graph.txt": ("avi", "49c0557276e29807", True),
    "avi_system.txt": ("avi", "0c6bc65442201132", False),
    "avi_core_protocol.txt": ("avi", "55532904a0918c61", True),
    "avi_retrieve.txt": ("avi", "a7cc38cfcfa0c6a1", True),
    "avi_perceive.txt": ("avi", "ec6a16f7b9ff0bc8", True),
    "avi_review.txt": ("avi", "094e2a8f7364a7cc", True),
    "avi_tools.txt": ("avi", "1c7a7919734333f2", True),
    # AgentCVR Appendix H.3: the master, one prompt per CrossVid task
    "cvr_master_bu.txt": ("agentcvr", "82b9a9f51014800e", True),
    "cvr_master_nc.txt": ("agentcvr", "4a8e2b5bf9506f70", True),
    "cvr_master_cc.txt": ("agentcvr", "3a8190c8e088e862", True),
    "cvr_master_pea.txt": ("agentcvr", "6ee2e2f237127bdf", True),
    "cvr_master_pi.txt": ("agentcvr", "e8bb69eb706e1f78", True),
    "cvr_master_fsa.txt": ("agentcvr", "2c68219300d9cc1c", True),
    "cvr_master_pss.txt": ("agentcvr", "c50aae34fb69e89d", True),
    "cvr_master_msr.txt": ("agentcvr", "7ca42d5294b442cf", True),
    "cvr_master_moc.txt": ("agentcvr", "5019f74b2831a06f", True),
    "cvr_master_ccqa.txt": ("agentcvr", "bd36daeb2c56fa29", True),
    # AgentCVR Appendix H.1: script synthesis, one prompt per task; H.2: the simulator
    "cvr_script_bu.txt": ("agentcvr", "78e7462403d4c0dd", True),
    "cvr_script_nc.txt": ("agentcvr", "1416c7562218ee89", True),
    "cvr_script_cc.txt": ("agentcvr", "3ea35fac57a9452f", True),
    "cvr_script_pea.txt": ("agentcvr", "ffbdd3a6a9097f6d", True),
    "cvr_script_pi.txt": ("agentcvr", "a3df657e2d233cd5", True),
    "cvr_script_fsa.txt": ("agentcvr", "fa4dff0fed097f4d", True),
    "cvr_script_pss.txt": ("agentcvr", "563009c3d4506e62", True),
    "cvr_script_msr.txt": ("agentcvr", "108e391c726fc17e", True),
    "cvr_script_moc.txt": ("agentcvr", "a48ec7f171d16de4", True),
    "cvr_simulator.txt": ("agentcvr", "847282d0954be8c5", True),
}


def _squash(text: str) -> str:
    # the AgentCVR text prints the master prompts' bullets as LaTeX \cdot
    return re.sub(r"\s+", "", text.replace("\\cdot", "·"))


@pytest.mark.parametrize("name", sorted(PAPER_PROMPTS))
def test_paper_prompts_are_pinned_and_verbatim(name: str) -> None:
    paper, digest, printed_whole = PAPER_PROMPTS[name]
    data = files("vidagent.prompts").joinpath(name).read_bytes()
    assert hashlib.sha256(data).hexdigest()[:16] == digest, (
        f"{name} changed: compare it with the paper ({paper}) and update its hash deliberately"
    )
    text = PAPERS / f"{paper}.txt"
    if printed_whole and text.is_file():  # beside the shared papers: the hash is still theirs
        assert _squash(data.decode("utf-8")) in _squash(text.read_text(encoding="utf-8")), name


def test_the_prompt_files_named_here_exist_and_nothing_else_is_claimed() -> None:
    """The table names real package files, each once, and no prompt of ours (not in a paper)."""
    names = {p.name for p in files("vidagent.prompts").iterdir()}
    assert set(PAPER_PROMPTS) <= names
    ours = {"cvr_master_generic.txt", "avi_global_explore.txt", "vlm_boxes.txt"}
    assert not ours & set(PAPER_PROMPTS)


#: Slots the papers' texts glue to the next word, kept in the files as the paper prints them
#: (the hashes above pin them): PDF extraction lost the space. ``vidagent.train.scripts.fill``
#: puts it back, so no filled prompt reads "Option Cis the ONLY".
GLUED_IN_PAPER: dict[str, list[str]] = {
    "cvr_script_bu.txt": ["<num_correct>Videos"],
    "cvr_script_cc.txt": ["<config_letter>is"],
    "cvr_script_fsa.txt": ["<num_steps>Distinct"],
    "cvr_script_moc.txt": ["<duration>seconds"],
    "cvr_script_msr.txt": ["<duration>seconds"],
    "cvr_script_pi.txt": ["<gap_duration>seconds"],
    "cvr_script_pss.txt": ["<num_steps>Distinct", "<num_steps>phases"],
}
SLOT = r"(?:<[a-z_]+>|\{[a-z_]+\})"
#: A slot glued to a word: a word character before it, or two letters after it (one letter after
#: a slot is a unit, as in "(0s to <duration>s)").
GLUED = re.compile(rf"\w{SLOT}|{SLOT}[A-Za-z]{{2,}}")


def test_every_slot_glued_to_a_word_in_a_prompt_file_is_the_papers_and_listed() -> None:
    found = {}
    for entry in files("vidagent.prompts").iterdir():
        if entry.name.endswith(".txt"):
            glued = GLUED.findall(entry.read_text(encoding="utf-8"))
            if glued:
                found[entry.name] = sorted(glued)
    assert found == {k: sorted(v) for k, v in GLUED_IN_PAPER.items()}
    for name, pieces in GLUED_IN_PAPER.items():
        paper = PAPERS / f"{PAPER_PROMPTS[name][0]}.txt"
        if paper.is_file():  # the paper prints them glued: kept on purpose, not ours
            text = paper.read_text(encoding="utf-8")
            assert all(piece in text for piece in pieces), name


@pytest.mark.parametrize("name", sorted(GLUED_IN_PAPER))
def test_filled_prompts_have_no_word_glued_to_a_value(name: str) -> None:
    from vidagent.train.scripts import fill

    template = files("vidagent.prompts").joinpath(name).read_text(encoding="utf-8")
    slots = set(re.findall(r"<([a-z_]+)>", template))
    filled = fill(template, {slot: "⟨v⟩" for slot in slots})  # a value with no word characters
    assert not re.search(r"⟩[A-Za-z]{2}|\w⟨", filled), name


def test_the_filled_cc_prompt_reads_as_english() -> None:
    from vidagent.train.scripts import synthesis_prompt
    from vidagent.train.slots import config

    prompt = synthesis_prompt("CC", config("CC", 0))
    letter = re.search(r"Option (\w) is the ONLY", prompt)
    assert letter is not None and f"Option {letter[1]}is" not in prompt
