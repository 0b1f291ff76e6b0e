"""Every command in the README, the docs pages and benchmarks/README.md is marked, and the
ones that can run offline run as written.

A shell or Python block is preceded by a marker line:

- ``<!-- example: offline -->``: needs no model server; run as it is;
- ``<!-- example: against-proxy -->``: talks to a proxy on 127.0.0.1:8088; run against a
  proxy (default settings) in front of the scripted upstream, with only that address
  replaced;
- ``<!-- example: manual (REASON) -->``: not run here (a model server, Docker, a build, a
  command that runs until Ctrl-C, a benchmark); the reason is required.

The runnable blocks of one document run in order in one folder (a later block may read a
file an earlier one wrote). Files the examples write under /tmp go to the test's own folder,
and ``.venv/bin/`` is the environment running the tests. The README's test command and the
commands ``.ci/run`` runs are marked apart (``test-command``, ``real-upstream-command``,
``lint-command``, ``docs-command``) and run by CI itself.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from benchmarks.support.servers import serve_in_thread
from benchmarks.support.upstream import Upstream
from config.settings import Settings
from proxy.app import create_app

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", ROOT / "benchmarks" / "README.md",
             *sorted((ROOT / "docs").rglob("*.md"))]
PROXY_ADDRESS = "127.0.0.1:8088"
EXAMPLE_TIMEOUT_S = 600
FENCE = re.compile(r"^([ \t]*)```(bash|sh|shell|python)[ \t]*\n", re.M)
MARKER = re.compile(r"<!-- (?:example: (offline|against-proxy|manual)( \(.+\))?|"
                    r"(test-command|lint-command|real-upstream-command|docs-command)) -->\n$")


@dataclass(frozen=True)
class Block:
    document: Path
    line: int
    kind: str  # offline, against-proxy, manual, or a .ci/run marker's name
    language: str
    code: str
    reason: str = ""

    @property
    def runnable(self) -> bool:
        return self.kind in ("offline", "against-proxy")


def blocks(document: Path) -> list[Block]:
    """Every shell or Python block of ``document``, with the marker line before it
    (kind ``unmarked`` when there is none)."""
    text = document.read_text()
    found = []
    for fence in FENCE.finditer(text):
        indent, language = fence.group(1), fence.group(2)
        end = text.index(f"\n{indent}```", fence.end() - 1)
        code = textwrap.dedent(text[fence.end():end + 1])
        before = text[:fence.start()].rsplit("\n", 2)
        marker = MARKER.search(before[-2].strip() + "\n") if len(before) >= 2 else None
        kind = (marker.group(1) or marker.group(3)) if marker else "unmarked"
        reason = (marker.group(2) or "").strip(" ()") if marker else ""
        found.append(Block(document, text.count("\n", 0, fence.start()) + 1, kind,
                           language, code, reason))
    return found


ALL = [block for document in DOCUMENTS for block in blocks(document)]


def where(block: Block) -> str:
    return f"{block.document.relative_to(ROOT)}:{block.line}"


def test_every_command_block_is_marked():
    unmarked = [where(b) for b in ALL if b.kind == "unmarked"]
    assert unmarked == [], "mark these blocks (see this module's docstring)"
    unexplained = [where(b) for b in ALL if b.kind == "manual" and not b.reason]
    assert unexplained == [], "say why these blocks are not run"
    assert all(PROXY_ADDRESS in b.code for b in ALL if b.kind == "against-proxy")


def test_the_marker_parser_sees_unmarked_and_marked_blocks(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n```bash\necho a\n```\n\n<!-- example: offline -->\n"
                    "```python\nprint(1)\n```\n\n- item\n\n  <!-- example: manual (why) -->\n"
                    "  ```bash\n  echo b\n  ```\n")
    kinds = [(b.kind, b.language, b.code, b.reason) for b in blocks(page)]
    assert kinds == [("unmarked", "bash", "echo a\n", ""), ("offline", "python", "print(1)\n", ""),
                     ("manual", "bash", "echo b\n", "why")]


def run(block: Block, tmp_path: Path, proxy_origin: str | None) -> str:
    code = block.code.replace("/tmp/", str(tmp_path) + "/")  # first: paths put in may be under /tmp
    code = code.replace(".venv/bin/", str(Path(sys.executable).parent) + "/")
    if block.kind == "against-proxy":
        assert proxy_origin is not None
        code = code.replace(f"http://{PROXY_ADDRESS}", proxy_origin)
    if block.language == "python":
        command = [sys.executable, "-c", code]
    else:
        command = ["bash", "-euo", "pipefail", "-c", code]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                          timeout=EXAMPLE_TIMEOUT_S)
    assert done.returncode == 0, f"{where(block)}\n{code}\nexit {done.returncode}\n{done.stderr[-3000:]}"
    return done.stdout


def check_chat_through_proxy(output: str, upstream: Upstream) -> None:
    status, headers = output.split("\n", 1)  # text mode: CRLF read as LF
    assert status.startswith("HTTP/1.1 200")
    forwarded = re.search(r"^x-tool-pruning-tools: (\d+)/117$", headers, re.M | re.I)
    assert forwarded is not None and 0 < int(forwarded[1]) < 117
    sent = [r for r in upstream.requests if r.path.endswith("/chat/completions")][-1]
    client_tools = [t for t in sent.json()["tools"]
                    if t["function"]["name"] not in ("load_tools", "search_tools")]
    assert len(client_tools) == int(forwarded[1])  # the header counts client tools only


def check_pruned_sdk_answer(output: str, upstream: Upstream) -> None:
    assert re.match(r"\d+/117 ", output), output  # the header the example prints first


#: Checks beyond "exits 0", by a fragment of the block they apply to.
CHECKS: dict[str, Callable[[str, Upstream], None]] = {
    "curl -s -D - http://127.0.0.1:8088/v1/chat/completions": check_chat_through_proxy,
    "client.chat.completions.with_raw_response": check_pruned_sdk_answer,
    "client.responses.with_raw_response": check_pruned_sdk_answer,
    "client.messages.with_raw_response": check_pruned_sdk_answer,
    "toolprune explain /tmp/request.json": lambda out, _: (
        None if "decision: pruned" in out and "of 117 tools" in out else pytest.fail(out)),
    "toolprune --version": lambda out, _: (
        None if re.match(r"toolprune \d+\.\d+", out) and "commands:" in out else pytest.fail(out)),
    "toolprune eval tests/data/bfcl_multi_turn_tradingbot": lambda out, _: (
        None if re.search(r"^toolprune\s+8\s+0\.\d+", out, re.M) else pytest.fail(out)),
    "python -m benchmarks.round_trip": lambda out, _: (
        None if "answered by the proxy, hidden from the client" in out else pytest.fail(out)),
}


def test_every_check_applies_to_a_block():
    runnable = [b.code for b in ALL if b.runnable]
    assert [key for key in CHECKS if not any(key in code for code in runnable)] == []


RUNNABLE_DOCUMENTS = [d for d in DOCUMENTS if any(b.runnable for b in blocks(d))]


@pytest.mark.parametrize("document", RUNNABLE_DOCUMENTS, ids=lambda d: str(d.relative_to(ROOT)))
def test_the_runnable_examples_of_a_document_run(document: Path, tmp_path: Path):
    upstream = Upstream()
    with ExitStack() as stack:
        proxy_origin = None
        runnable = [b for b in blocks(document) if b.runnable]
        if any(b.kind == "against-proxy" for b in runnable):
            upstream_origin = stack.enter_context(serve_in_thread(upstream.app))
            # The examples' first request waits for its catalogue's index, as after `--warm`.
            settings = Settings(upstream_url=upstream_origin + "/v1", index_timeout_s=300.0)
            proxy_origin = stack.enter_context(serve_in_thread(create_app(settings)))
        for block in runnable:
            output = run(block, tmp_path, proxy_origin)
            for fragment, check in CHECKS.items():
                if fragment in block.code:
                    check(output, upstream)
