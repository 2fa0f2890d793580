"""The configuration matrices that fill the synthesis prompts' ``<slots>`` (AgentCVR §3.2).

The released generators cross attribute pools (recipes × variation types × difficulties, road
scenes × densities × camera set-ups, …) into ≈11.8k configurations. The pools here are shorter
samples of the same axes; :func:`config` draws configuration ``index`` of a task
deterministically from ``(seed, index)``, so a resumed synthesis asks for the same ones.
"""

from __future__ import annotations

import random
from typing import Any

RECIPES = [
    "tomato egg stir-fry",
    "beef tacos",
    "mushroom risotto",
    "pad thai",
    "pancakes",
    "chicken curry",
    "caesar salad",
    "fried rice",
    "banana bread",
    "miso soup",
]
SCENES = [
    "a four-way signalised intersection",
    "a roundabout with three exits",
    "a highway on-ramp merge",
    "a school drop-off street",
    "a supermarket car park",
]
DENSITIES = ["sparse (under 5 vehicles)", "moderate (5-12 vehicles)", "dense (over 12 vehicles)"]
CAMERAS = [
    "View A: high oblique from the north; View B: top-down from the east",
    "View A: low drone pass along the road; View B: hovering over the junction",
    "View A: wide shot from a tall building; View B: tight shot near the crossing",
]
GENRES = ["Sci-Fi Thriller", "Crime Mystery", "Survival Horror", "War Espionage"]
SETTINGS = [
    "an abandoned research station",
    "a night train",
    "a desert outpost",
    "a flooded city block",
    "a mountain monastery",
]
CONFLICTS = [
    "a betrayal by a trusted ally",
    "an accidental fire",
    "a stolen key document",
    "a sudden storm cutting power",
    "a hidden injury revealed",
]
KEY_OBJECTS = ["a brass key", "a red notebook", "a broken radio", "a silver locket"]
ACTIONS = [
    "hides it under a floorboard",
    "hands it to a stranger",
    "burns it",
    "drops it while running",
]
DIFFERENCES = [
    "Tool Usage",
    "Ingredient Uniqueness",
    "Processing Method",
    "Cooking Technique",
    "Sequence of Events",
]
CC_TARGETS = [
    ("A", "Video 1", "standard, the difference is clearly visible"),
    ("B", "Video 2", "subtle, the difference is brief"),
    ("C", "Video 3", "hard, distractors are 90% identical"),
    ("D", "Video 4", "negative, the target lacks what the others show"),
]
BEHAVIOURS = [
    ("Animal", "a lion resting due to exhaustion", ["sleeping", "stalking prey"]),
    ("Animal", "a bird building a nest", ["preening", "feeding chicks"]),
    ("Human", "a person stretching to warm up", ["yawning", "reaching for a shelf"]),
    ("Human", "a cook tasting to adjust seasoning", ["eating lunch", "smelling food"]),
]
MODIFIERS = [
    "Standard/Calm",
    "Urgent/Rushed",
    "Failed/Clumsy Attempt",
    "Aggressive/Intense",
    "Tired/Lazy",
    "Group/Social Interaction",
]
TOYS = [
    ("excavator_01", ["base", "cabin", "arm", "bucket", "wheels"]),
    ("dump_truck_02", ["chassis", "cab", "bed", "axle", "wheels"]),
    ("crane_03", ["base", "tower", "jib", "hook", "counterweight"]),
]
PERSONAS = [("Expert", 0.1), ("Novice", 0.8), ("Careless", 0.6)]
ERRORS = ["wrong_order", "previous_one_is_mistake", "shouldn't_have_happened", "wrong_position"]
FOCUS = ["heat and colour change", "knife work", "texture and consistency", "utensils used"]
GRANULARITY = ["phase", "action", "detail"]
VARIATIONS = ["tool variance", "perspective shift", "pacing difference", "ingredient substitution"]
DIFFICULTY = ["easy", "hard"]


def _slots(start: float, end: float, rng: random.Random) -> str:
    slots, t = [], start
    while t < end:
        step = min(end - t, rng.randint(5, 15))
        slots.append(f"[{t:.0f}s-{t + step:.0f}s]")
        t += step
    return ", ".join(slots)


def config(task: str, index: int, seed: int = 0) -> dict[str, Any]:
    """Configuration ``index`` of ``task``: the values of its prompt's slots."""
    rng = random.Random(f"{seed}:{task}:{index}")
    pick = rng.choice
    if task in ("MSR", "MOC"):
        return {
            "scenario": pick(SCENES),
            "density": pick(DENSITIES),
            "camera_desc": pick(CAMERAS),
            "duration": rng.randint(40, 60),
        }
    if task == "PSS":
        return {
            "recipe": pick(RECIPES),
            "num_steps": rng.randint(3, 6),
            "difficulty": pick(DIFFICULTY),
            "focus": pick(FOCUS),
        }
    if task == "PI":
        begin, gap, end = (rng.randint(60, 150) for _ in range(3))
        conflict = pick(CONFLICTS)
        return {
            "genre": pick(GENRES),
            "setting": pick(SETTINGS),
            "conflict": conflict,
            "gap_duration": gap,
            "begin_slots_str": _slots(0, begin, rng),
            "end_slots_str": _slots(0, end, rng),
        }
    if task == "NC":
        keywords = (
            f"key object {pick(KEY_OBJECTS)}; action: the character {pick(ACTIONS)}; "
            f"environment: {pick(SETTINGS)}"
        )
        durations = ", ".join(f"Video {v}: {pick([420, 450])} seconds" for v in "ABCD")
        return {"genre": pick(GENRES), "keywords_str": keywords, "video_instructions": durations}
    if task == "FSA":
        return {
            "recipe": pick(RECIPES),
            "granularity": pick(GRANULARITY),
            "variation": pick(VARIATIONS),
            "difficulty": pick(DIFFICULTY),
            "num_steps": 5,
        }
    if task == "CC":
        letter, label, style = pick(CC_TARGETS)
        return {
            "recipe": pick(RECIPES),
            "difference_type": pick(DIFFERENCES),
            "config_label": label,
            "config_style": style,
            "config_letter": letter,
        }
    if task == "BU":
        kind, activity, distractors = pick(BEHAVIOURS)
        return {
            "task_type": kind,
            "target_activity": activity,
            "context_modifier": pick(MODIFIERS),
            "distractors": ", ".join(distractors),
            "num_correct": rng.choice([1, 1, 2, 3]),
        }
    if task == "PEA":
        toy, parts = pick(TOYS)
        people = [
            f"Video {i}: {name} (error rate {rate}), errors: {', '.join(rng.sample(ERRORS, 1))}"
            for i, (name, rate) in enumerate(rng.sample(PERSONAS, 3), 1)
        ]
        return {
            "toy_id": toy,
            "parts_str": ", ".join(parts),
            "video_requirements_and_personas": "; ".join(people),
        }
    raise KeyError(task)
