"""How a model reaches the tools outside the block: the client's deferral and its own search
(emulated, or run by the client), toolprune's meta-tools and their answers, name search. Imports
:mod:`selection.errors`, :mod:`selection.catalog`, :mod:`selection.choosing`,
:mod:`selection.conversation`, :mod:`selection.indexes`, :mod:`selection.ranking`."""
