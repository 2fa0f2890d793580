"""Deep Video Discovery (``dvd``): :mod:`.agent` holds the strategy (:class:`.agent.DVDAgent`)."""
