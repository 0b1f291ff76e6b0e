"""Text into vectors: the embedder protocol, the packaged ONNX model (and its lean form), an
OpenAI-compatible embeddings endpoint. Imports :mod:`selection.errors`."""
