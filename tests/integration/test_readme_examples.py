"""The README's examples run as written.

Blocks marked ``<!-- example: offline -->`` need no model server and run as they are.
Blocks marked ``<!-- example: against-proxy -->`` talk to the proxy on 127.0.0.1:8088;
they run against a proxy (default settings) in front of the scripted test upstream, with
only that address replaced. Files the examples write under /tmp go to the test's own
folder, and ``.venv/bin/`` is the environment running the tests.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import RunningUpstream
from benchmarks.support.upstream import Chat

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
BLOCK = re.compile(r"<!-- example: ([\w-]+) -->\n```bash\n(.*?)\n```", re.S)
PROXY_ADDRESS = "127.0.0.1:8088"
EXAMPLE_TIMEOUT_S = 600


def examples(kind: str) -> list[str]:
    return [code for marked, code in BLOCK.findall(README) if marked == kind]


def run(code: str, tmp_path: Path, proxy_origin: str | None = None) -> str:
    code = code.replace("/tmp/", str(tmp_path) + "/")  # first: the paths put in may be under /tmp
    code = code.replace(".venv/bin/", str(Path(sys.executable).parent) + "/")
    if proxy_origin is not None:
        code = code.replace(f"http://{PROXY_ADDRESS}", proxy_origin)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", code], cwd=ROOT, capture_output=True, text=True,
        timeout=EXAMPLE_TIMEOUT_S,
    )
    assert done.returncode == 0, f"{code}\nexit {done.returncode}\n{done.stderr[-2000:]}"
    return done.stdout


def test_the_readme_marks_its_runnable_examples():
    assert len(examples("offline")) >= 3
    assert len(examples("against-proxy")) >= 1
    assert all(PROXY_ADDRESS in code for code in examples("against-proxy"))


def test_try_it_request_through_the_proxy_then_explain(
    tmp_path: Path, upstream: RunningUpstream, proxy: str
):
    upstream.upstream.script(Chat(content="There are 2 open pull requests."))
    (request,) = examples("against-proxy")
    output = run(request, tmp_path, proxy)
    status, headers = output.split("\n", 1)  # text mode: CRLF read as LF
    assert status.startswith("HTTP/1.1 200")
    forwarded = re.search(r"^x-tool-pruning-tools: (\d+)/117$", headers, re.M | re.I)
    assert forwarded is not None and 0 < int(forwarded[1]) < 117
    (sent,) = [r for r in upstream.upstream.requests if r.path.endswith("/chat/completions")]
    client_tools = [t for t in sent.json()["tools"] if t["function"]["name"] not in
                    ("load_tools", "search_tools")]
    assert len(client_tools) == int(forwarded[1])  # the header counts client tools only
    assert "There are 2 open pull requests." in output

    explain = next(code for code in examples("offline") if "toolprune explain" in code)
    explained = run(explain, tmp_path)
    assert "decision: pruned" in explained and "of 117 tools" in explained


@pytest.mark.parametrize("keyword", ["--version", "toolprune eval"])
def test_offline_examples(tmp_path: Path, keyword: str):
    (code,) = [c for c in examples("offline") if keyword in c]
    output = run(code, tmp_path)
    if keyword == "--version":
        assert re.match(r"toolprune \d+\.\d+", output)
        assert "commands:" in output
    else:
        assert re.search(r"^toolprune\s+8\s+0\.\d+", output, re.M)
