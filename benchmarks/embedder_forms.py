"""The embedded model as shipped vs its lean form (``selection/model_prep.py``), side by side.

Each form is loaded in a fresh child process (so resident memory is the model's and the
imports', nothing left from the other form), which reports its resident memory after
loading and after embedding, the CPU time (its own thread: ONNX Runtime runs one intra-op
thread in the calling thread) per text for three kinds of text, and the vectors. Forms
alternate over ``--rounds``; the table gives medians. Texts: one-sentence requests, the
GitHub MCP server's tool descriptions shipped in ``tests/data`` (name + description), and
multi-sentence requests made of three of those descriptions' first sentences.

    PYTHONPATH=. python benchmarks/embedder_forms.py            # ~1 minute
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CATALOG = REPO / "tests" / "data" / "real_catalogs" / "github_mcp_server.json"
FORMS = ("packaged", "lean")

CHILD = r"""
import json, sys, time
from pathlib import Path
import numpy as np
from selection.embedders import OnnxEmbedder

def rss_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024

cache, texts_file, vectors_file = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
kinds = json.loads(Path(texts_file).read_text())
embedder = OnnxEmbedder(cache_dir=cache)
embedder.load_sync()
loaded = rss_mib()
report, vectors = {"rss_loaded": loaded}, []
for kind, texts in kinds.items():
    started = time.thread_time()
    for text in texts:
        vectors.append(embedder.embed_sync([text]))
    report[kind] = 1000 * (time.thread_time() - started) / len(texts)
report["rss_after"] = rss_mib()
np.save(vectors_file, np.vstack(vectors))
print(json.dumps(report))
"""


def texts() -> dict[str, list[str]]:
    tools = [t["function"] for t in json.loads(CATALOG.read_text())]
    descriptions = [f"{t['name']}: {t.get('description', '')}" for t in tools]
    firsts = [t.get("description", "").split(". ")[0] for t in tools]
    requests = [". ".join(firsts[i:i + 3]) for i in range(0, 90, 3)]
    verbs = ("List", "Show", "Find", "Close", "Open", "Merge")
    short = [f"{verbs[i % 6]} the pull requests of octo/widgets labelled bug-{i}" for i in range(60)]
    return {"one sentence": short, "tool description": descriptions[:60], "request": requests}


def run_form(form: str, work: Path, texts_file: Path, round_: int) -> tuple[dict, np.ndarray]:
    if form == "packaged":  # a file where the cache would be: the model runs as shipped
        (work / "blocked").write_text("")
        cache = work / "blocked" / "models"
    else:
        cache = work / "models"
    vectors = work / f"{form}-{round_}.npy"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(cache), str(texts_file), str(vectors)],
        cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1]), np.load(vectors)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs per form (default 3)")
    args = parser.parse_args(argv)
    kinds = texts()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        texts_file = work / "texts.json"
        texts_file.write_text(json.dumps(kinds))
        reports: dict[str, list[dict]] = {form: [] for form in FORMS}
        vectors: dict[str, np.ndarray] = {}
        for round_ in range(args.rounds):
            for form in FORMS if round_ % 2 == 0 else reversed(FORMS):
                report, vectors[form] = run_form(form, work, texts_file, round_)
                reports[form].append(report)
    columns = ["rss_loaded", "rss_after", *kinds]
    print(f"{'form':<9}  {'RSS loaded':>10}  {'RSS after':>9}  "
          + "  ".join(f"{'CPU ms, ' + k:>24}" for k in kinds))
    for form in FORMS:
        cells = [statistics.median(r[c] for r in reports[form]) for c in columns]
        print(f"{form:<9}  {cells[0]:7.0f} MiB  {cells[1]:6.0f} MiB  "
              + "  ".join(f"{c:24.2f}" for c in cells[2:]))
    identical = np.array_equal(vectors["packaged"], vectors["lean"])
    print(f"vectors bit-identical: {identical} "
          f"(max |difference| {np.abs(vectors['packaged'] - vectors['lean']).max():.2e})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
