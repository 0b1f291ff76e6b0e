"""Scoring a catalogue for one turn: the engine (the only I/O), the signals in the registry's order,
groups, the dependency producers. Imports :mod:`selection.errors`, :mod:`selection.catalog`,
:mod:`selection.embedders`, :mod:`selection.indexes`, :mod:`selection.learning`."""
