"""One module per benchmark: its loader, prompt and official scorer (see
:mod:`vidagent.bench.base` for the protocol they implement and :mod:`vidagent.bench` for the
registry)."""
