"""Package data: JSON Schemas of what vidagent writes for others to read (``export.schema.json``: an
evidence export's ``index.json``; ``answer.schema.json``: the answer of ``ask --json``, the HTTP API
and MCP, with the citation labels)."""
