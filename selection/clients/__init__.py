"""How a model reaches the tools outside the block: the client's deferral and its own search
(emulated, or run by the client), toolprune's meta-tools and their answers, the ``call_tool``
bridge to tools delivered in the conversation and the reading (and repair) of its calls, name
search. Imports
:mod:`selection.errors`, :mod:`selection.catalog`, :mod:`selection.choosing`,
:mod:`selection.conversation`, :mod:`selection.indexes`, :mod:`selection.ranking`."""
