"""Which tools a turn forwards, in which order: its contract, what its ranking wants, candidates,
admission, the block's order and start, the prefix-cache model, the conversation's state. Pure.
Imports :mod:`selection.catalog`, :mod:`selection.indexes`, :mod:`selection.learning`,
:mod:`selection.ranking`."""
