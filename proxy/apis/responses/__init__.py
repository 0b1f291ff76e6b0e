"""The Responses API (``/v1/responses``): the adapter of the turn core (:mod:`proxy.turn`),
its stream relay, its tools (namespaces, ``tool_search``) and its tool search edge."""
