"""The ranking signals: each scores every tool of a catalogue for one turn, and the
pipeline (:mod:`selection.ranking.pipeline`) adds their contributions in the registry's order
(:mod:`selection.ranking.signals.registry`). One module per signal."""
