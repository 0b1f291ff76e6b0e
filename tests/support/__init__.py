"""Test-only helpers: OpenAI schema checks, SSE parsing, agent prompts, the optional
evaluation data. What the tests share with the benchmarks (the scripted upstream, loopback
servers, redis-server, llama-server, data paths) is in ``benchmarks.support``."""
