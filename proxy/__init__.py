"""toolprune proxy: ASGI app (Starlette), forwarding, chat-completions interception, metrics, CLI."""
