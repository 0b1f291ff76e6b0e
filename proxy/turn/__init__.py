"""The acting ``POST /v1/chat/completions`` turn: plan the selection, rewrite the body, serve
the response (plain or streaming) and answer the meta-tool calls."""
