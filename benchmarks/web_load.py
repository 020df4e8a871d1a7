#!/usr/bin/env python3
"""Seconds from loading the web page to the README's main command's answer, in headless chromium (issue 47 wants
it under 5 s; this says the figure, no test asserts it).

    python web/build.py && python benchmarks/web_load.py [--runs 5] [--dist web/dist] [--json]

Each run is a fresh browser (no HTTP or compiled-wasm cache: a first visit) loading
index.html#<the main command's flags> from a local http.server, and stops the clock when the answer (the verdict
and the longest context) is drawn. Reported per run, from navigation start (the page's performance.now()):
Pyodide loaded (the Python runtime, its wasm and standard library), vrambudget unpacked and imported, the pickers
filled, the answer drawn; then the CLI's answer lines + the `vllm serve` command, and the GMU sweep (9 predicts),
which follow the answer. Also a CPU calibration (a CPython loop here), since Pyodide's start is CPU-bound and this
figure moves with the machine.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import re
import shlex
import statistics
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main_command_hash() -> tuple[str, str]:
    """The README's main command and the page's #fragment that asks it (the form's fields by their ids)."""
    from vrambudget.hardware.catalog import lookup

    m = re.search(r"<!-- output: vrambudget (predict [^>]*?) -->", (REPO / "README.md").read_text(encoding="utf-8"))
    words = shlex.split(m.group(1))[1:]
    names = {"--gpu": "gpu", "-m": "model", "--model": "model", "--gmu": "gmu", "--gpu-memory-utilization": "gmu",
             "--max-model-len": "max_model_len", "--kv-cache-dtype": "kv_cache_dtype", "--max-num-seqs": "max_num_seqs",
             "--vllm-version": "vllm_version", "--tensor-parallel-size": "tensor_parallel_size"}
    q, i = {}, 0
    while i < len(words):
        w = words[i]
        if w == "--mtp":
            k = words[i + 1] if i + 1 < len(words) and words[i + 1].isdigit() else None
            q["mtp"] = k or "2"
            i += 2 if k else 1
        elif w == "--enforce-eager":
            q["enforce_eager"] = "1"
            i += 1
        elif w in names:
            q[names[w]] = lookup(words[i + 1]).key if w == "--gpu" else words[i + 1]
            i += 2
        else:
            raise SystemExit(f"the README's main command uses {w}, which this benchmark does not map")
    return "vrambudget " + m.group(1), urlencode(q)


def cpu_calibration() -> float:
    """Seconds CPython takes for 10 million additions here (a laptop of 2024: about 0.3-0.5 s)."""
    t = time.perf_counter()
    s = 0
    for i in range(10_000_000):
        s += i
    return time.perf_counter() - t


def serve(root: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def one_run(p, chromium: str, url: str, return_visit: bool = False) -> dict:
    """One fresh browser: the page's own timings (ms since navigation start) once the GMU sweep is drawn. With
    `return_visit`, the page is loaded once first and the timings are the second load's, in the same browser (its
    HTTP cache and compiled-wasm cache warm: a user's return visit)."""
    browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
    try:
        context = browser.new_context()
        page = context.new_page()
        if return_visit:
            page.goto(url)
            page.wait_for_function("() => window.vrambudget && window.vrambudget.answers > 0", timeout=300_000)
            page.close()
            page = context.new_page()
        page.goto(url)
        page.wait_for_function("() => window.vrambudget && (window.vrambudget.answers > 0 || window.vrambudget.loadError "
                               "|| window.vrambudget.error)", timeout=300_000)
        err = page.evaluate("window.vrambudget.loadError || window.vrambudget.error")
        if err:
            raise SystemExit(f"the page did not answer: {err}")
        page.wait_for_function("() => document.getElementById('sweep').dataset.seq === '1'", timeout=300_000)
        return {"timings": page.evaluate("window.vrambudget.timings"), "context": page.inner_text("#context")}
    finally:
        browser.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dist", type=Path, default=REPO / "web" / "dist")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--return-visit", action="store_true", help="time a second load in the same browser (caches warm)")
    a = ap.parse_args()
    if not (a.dist / "index.html").is_file():
        raise SystemExit(f"{a.dist} is not built: python web/build.py --out {a.dist}")
    from playwright.sync_api import sync_playwright

    command, fragment = main_command_hash()
    server, base = serve(a.dist)
    url = f"{base}index.html#{fragment}"
    runs = []
    with sync_playwright() as p:
        for _ in range(a.runs):
            runs.append(one_run(p, a.chromium, url, a.return_visit))
    server.shutdown()
    cal = cpu_calibration()
    per_run = []
    for r in runs:
        t, u = r["timings"], r["timings"]["last_update"]
        per_run.append({"pyodide_loaded_s": t["pyodide_ms"] / 1000, "vrambudget_ready_s": t["ready_ms"] / 1000,
                        "answer_s": t["first_answer_ms"] / 1000, "answer_lines_and_command_s": u["command"] / 1000,
                        "gmu_sweep_s": u["sweep"] / 1000})
    per_run = [{k: round(v, 2) for k, v in r.items()} for r in per_run]
    answers = [r["answer_s"] for r in per_run]
    out = {"command": command, "url_fragment": fragment, "runs": len(runs), "return_visit": a.return_visit,
           "cpu_calibration_s": round(cal, 3),
           "answer_s": {"median": round(statistics.median(answers), 2), "min": min(answers), "max": max(answers)},
           "per_run": per_run, "answer": runs[-1]["context"]}
    if a.json:
        print(json.dumps(out, indent=1))
    else:
        visits = 'return visits, caches warm' if a.return_visit else 'fresh browsers'
        print(f"{command}  (index.html#{fragment}, {len(runs)} {visits})")
        print(f"load -> answer: median {out['answer_s']['median']:.2f} s (min {out['answer_s']['min']:.2f}, max "
              f"{out['answer_s']['max']:.2f}); target 5 s")
        for i, r in enumerate(out["per_run"], 1):
            print(f"  run {i}: Pyodide {r['pyodide_loaded_s']:.2f} s, vrambudget ready {r['vrambudget_ready_s']:.2f} s, "
                  f"answer {r['answer_s']:.2f} s, answer lines + command {r['answer_lines_and_command_s']:.2f} s, "
                  f"GMU sweep {r['gmu_sweep_s']:.2f} s")
        print(f"answer: {out['answer']}")
        print(f"CPU calibration: CPython 10M additions in {cal:.2f} s here (a 2024 laptop: about 0.3-0.5 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
