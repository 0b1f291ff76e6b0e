"""What the benchmarks, the scripted demonstration and the tests share, importable without
any test code or pytest: the scripted OpenAI-compatible upstream (``upstream``,
``api_replies``), servers on loopback (``servers``), a real ``redis-server`` (``redis_server``),
a real llama-server (``llama``) and the paths of the data in the repository (``data``)."""
