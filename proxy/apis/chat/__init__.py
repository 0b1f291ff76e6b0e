"""Chat Completions (``/v1/chat/completions``): the adapter of the turn core
(:mod:`proxy.turn`), the round reader and the client writer."""
