"""Script-Simulated RL (AgentCVR §3): train the ``cvr`` master with GRPO in a text simulator.

- :mod:`.scripts`: the canonical script schema, its validation, resumable JSONL sets, and
  synthesis with the paper's nine prompts (Appendix H.1) against any ``llm``.
- :mod:`.templates`: a deterministic template generator of small script sets (offline tests
  and the offline demo; not the paper's method).
- :mod:`.simulator`: a :class:`~vidagent.agents.cvr.protocol.CvrEnvironment` played from a
  script (the visual agent by an ``llm`` with the H.2 prompt or a deterministic reader; the
  audio agent from the script's captions).
- :mod:`.rewards`: R_fmt (0.1) + R_ans (1/0) of a finished episode.
- :mod:`.grpo`: the multi-turn GRPO loop (TRL components + accelerate); :mod:`.policy`,
  :mod:`.checkpoint`, :mod:`.metrics`, :mod:`.config` around it; :mod:`.evaluate` scores
  masters on held-out scripts.

Everything heavy (torch, transformers, trl, peft, accelerate) is imported inside functions.
"""
