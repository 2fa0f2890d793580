"""The package's version, in a module of its own at the bottom of the rank table, so that any
part (the CLI's ``--version``, the HTTP health check, a benchmark run's manifest) reads it without
importing the package façade from below."""

__version__ = "0.1.0"
