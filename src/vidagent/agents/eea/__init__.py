"""EEA (``eea``): :mod:`.agent` holds the search loop (:class:`.agent.EEAAgent`), :mod:`.tree` the
segment tree, sampling and reward fusion, :mod:`.retrieval` the query anchors, :mod:`.replies`
the parsers of the model's replies."""
