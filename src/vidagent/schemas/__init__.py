"""Package data: JSON Schemas of the files vidagent writes for others to read (``export.schema.json``: an evidence export's ``index.json``)."""
