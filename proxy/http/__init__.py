"""HTTP plumbing: ASGI helpers, forwarding to the upstream, headers, SSE framing, errors in
OpenAI's shape, the observability middleware. Knows nothing of tools or selection."""
