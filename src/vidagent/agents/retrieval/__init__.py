"""The no-LLM ``retrieval`` baseline: :mod:`.agent` holds :class:`.agent.RetrievalAgent`."""
