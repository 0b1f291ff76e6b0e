"""The Anthropic Messages API (``/v1/messages``): the adapter of the turn core
(:mod:`proxy.turn`), its stream relay and its tool search edge."""
