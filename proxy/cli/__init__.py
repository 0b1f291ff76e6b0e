"""The ``toolprune`` command line: ``serve``, ``eval``, ``explain``, ``usage report``."""
