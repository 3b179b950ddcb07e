"""Run the notebooks side by side on one GPU until a deadline; write ``$OUT/gpu_runs.json``.

    python benchmarks/gpu_lease/pool.py SECONDS WORKERS [PRESET:NN ...]

Default jobs, longest first: every notebook with the ``gpu`` preset, then 01 with ``t4`` (fp16 mixed precision,
which a T4 would use). Each runs through ``scripts/run_course.py`` as ``make course`` does. A job with under 45 s
left is not started, one still running at the deadline is stopped ("timeout"). The results file is rewritten after
every job, and each failed or stopped notebook comes back as ``failed-<preset>-NN.ipynb`` (images dropped) so
that its earlier cells can be read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

LONGEST_FIRST = ["10", "03", "12", "02", "04", "11", "06", "09", "07", "05", "01", "08"]
MAX_FAILED_NOTEBOOKS = 5  # the device tool returns at most 8 files


def notebook_names() -> dict[str, str]:
    return {p.name[:2]: p.name for p in Path("notebooks").glob("[0-9][0-9]_*.ipynb")}


def run_job(preset: str, notebook: str, start: float, deadline: float) -> dict:
    out = Path(f"/tmp/runs/{preset}-{notebook[:2]}")
    begun = time.time()
    row = {"preset": preset, "notebook": notebook, "start_s": round(begun - start, 1), "out": str(out)}
    if deadline - begun < 45:
        return row | {"rc": "not started (deadline)"}
    cmd = [sys.executable, "scripts/run_course.py", "--preset", preset, "--out", str(out), f"notebooks/{notebook}"]
    try:
        done = subprocess.run(cmd, timeout=deadline - begun, capture_output=True, text=True)
        row |= {"rc": done.returncode, "tail": (done.stdout + done.stderr)[-2500:]}
    except subprocess.TimeoutExpired:
        row |= {"rc": "timeout"}
    row["end_s"] = round(time.time() - start, 1)
    if (out / "summary.json").is_file():
        row["summary"] = json.loads((out / "summary.json").read_text())
    return row


def failed_or_stopped(row: dict) -> bool:
    """A run that failed, or was stopped at the deadline (its notebook holds the cells papermill finished)."""
    return row["rc"] == "timeout" or ("tail" in row and (row.get("summary") or [{}])[0].get("status") != "pass")


def without_images(path: Path) -> str:
    notebook = json.loads(path.read_text())
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            output.get("data", {}).pop("image/png", None)
    return json.dumps(notebook)


def main(argv: list[str]) -> int:
    seconds, workers = float(argv[0]), int(argv[1])
    names = notebook_names()
    if len(argv) > 2:
        jobs = [(job.split(":")[0], names[job.split(":")[1]]) for job in argv[2:]]
    else:
        jobs = [("gpu", names[n]) for n in LONGEST_FIRST if n in names] + [("t4", names["01"])]
    out_dir = Path(os.environ["OUT"])
    start = time.time()
    results: list[dict] = []
    with ThreadPoolExecutor(workers) as pool:
        futures = [pool.submit(run_job, preset, nb, start, start + seconds) for preset, nb in jobs]
        for future in as_completed(futures):
            row = future.result()
            results.append(row)
            summary = (row.get("summary") or [{}])[0]
            print(f"{row.get('end_s', '-'):>6} {row['preset']} {row['notebook']}: rc={row['rc']} "
                  f"{summary.get('status')} {summary.get('seconds')} s", flush=True)  # fmt: skip
            (out_dir / "gpu_runs.json").write_text(json.dumps({"workers": workers, "results": results}, indent=1))
    failed = [r for r in results if failed_or_stopped(r)]
    for row in failed[:MAX_FAILED_NOTEBOOKS]:
        executed = Path(row["out"]) / row["notebook"]
        if executed.is_file():
            (out_dir / f"failed-{row['preset']}-{row['notebook'][:2]}.ipynb").write_text(without_images(executed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
