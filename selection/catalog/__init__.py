"""The catalogue as a request brings it (``tools`` parsed, cached per body, or a tool block written
as text), its groups, what its tools cost in tokens, and the policy over it. Imports
:mod:`selection.errors` and :mod:`selection.conversation`."""
