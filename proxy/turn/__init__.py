"""The acting turn, whatever its API: decide, plan the selection, serve the upstream rounds
and answer the meta-tool calls. Each API is an adapter of :mod:`proxy.turn.adapter`
(:mod:`proxy.apis`); nothing here imports an API package."""
