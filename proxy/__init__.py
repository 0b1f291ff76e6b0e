"""toolprune proxy: FastAPI app, forwarding, chat-completions interception, metrics, CLI."""
