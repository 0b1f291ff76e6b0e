"""What the proxy knows of the model server behind it: which server it is (llama-server,
Lemonade, vLLM, Ollama, LM Studio, or unknown), learned from the server's own endpoints,
and what follows from it for a turn (``docs/servers/``)."""
