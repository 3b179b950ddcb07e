"""The README's runtime columns, generated from measured runs instead of typed by hand.

    python benchmarks/runtimes.py runs/<time>/summary.json [...]   # add make course runs, rewrite the README
    python benchmarks/runtimes.py                                  # rewrite the README from the record only

`make course` writes ``runs/<time>/summary.json`` with each notebook's wall time and the preset it ran with
(`PRESET=cpu-ci make course` for the CI column). Each summary's passing notebooks are added to
``benchmarks/results/runtimes.json`` (date, minutes, machine, source); the README's table then shows, per
notebook and preset, the range of the measurements taken on the most recent date. Failed runs are not
recorded: a runtime only counts when the notebook also learned what it claims. A measurement of code that
changed since keeps its row, with a ``superseded`` field saying which commit changed it, and no longer counts.
``tests/test_docs.py`` checks that the README's table matches the record, so an edit by hand fails the test suite.

Each notebook's own "Expected runtime" table is rendered from the same record: its runtime column shows the
range and the date measured (``4.0–4.7 min (measured 2026-11-24)``), so a notebook cannot quote a stale number.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
RECORD = REPO_ROOT / "benchmarks" / "results" / "runtimes.json"
README = REPO_ROOT / "README.md"
COLUMNS = ("cpu-ci", "cpu", "t4", "gpu")  # the README's four runtime columns, left to right
NOT_MEASURED = "not measured yet"


def load_record(path: Path = RECORD) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {"measurements": []}


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores"


def add_summary(record: dict, summary_path: Path, date: str | None = None, host: str | None = None) -> int:
    """Add the passing notebooks of one ``make course`` summary; returns how many were added."""
    runs = json.loads(Path(summary_path).read_text())
    # to the minute: a run recorded later the same day must be the latest (dates compare as strings)
    date = date or time.strftime("%Y-%m-%d %H:%M", time.localtime(Path(summary_path).stat().st_mtime))
    added = 0
    for run in runs:
        result = run.get("record") or {}
        if run.get("status") != "pass" or result.get("preset") not in COLUMNS:
            continue
        record["measurements"].append({
            "notebook": run["notebook"], "preset": result["preset"], "minutes": round(run["seconds"] / 60, 1),
            "date": date, "machine": host or machine(), "source": f"make course ({Path(summary_path).parent.name})",
        })  # fmt: skip
        added += 1
    return added


def latest(record: dict, notebook: str, preset: str) -> tuple[str, list[float]] | None:
    """The latest date (and time, where recorded) this notebook and preset were measured, and the minutes of every
    row with that stamp, sorted; None if never.

    Rows marked ``superseded`` (the notebook's code changed after them) are left out.
    """
    rows = [m for m in record["measurements"]
            if m["notebook"] == notebook and m["preset"] == preset and not m.get("superseded")]  # fmt: skip
    if not rows:
        return None
    date = max(m["date"] for m in rows)
    return date, sorted(m["minutes"] for m in rows if m["date"] == date)


def cell(record: dict, notebook: str, preset: str) -> str:
    """'4.0 min', '4.0–5.6 min' (the range on the latest date measured), or 'not measured yet'."""
    measured = latest(record, notebook, preset)
    if measured is None:
        return NOT_MEASURED
    low, high = measured[1][0], measured[1][-1]
    return f"{low:.1f} min" if low == high else f"{low:.1f}–{high:.1f} min"


def render_readme(text: str, record: dict) -> str:
    """The README with each notebook row's last four cells replaced by the recorded runtimes."""
    out = []
    for line in text.split("\n"):
        match = re.match(r"^\| (\d\d) \| \[.*?\]\(notebooks/(\d\d_[a-z0-9_]+)\.ipynb\)", line)
        if match:
            cells = line.strip("|").split(" | ")
            if len(cells) != 3 + len(COLUMNS):
                raise ValueError(f"README row for {match[2]} has {len(cells)} cells, expected {3 + len(COLUMNS)}")
            cells[3:] = [cell(record, match[2], preset) for preset in COLUMNS]
            line = "| " + " | ".join(c.strip() for c in cells) + " |"
        out.append(line)
    return "\n".join(out)


def notebook_cell(record: dict, notebook: str, preset: str) -> str:
    """A notebook table's runtime cell: '2.0–2.4 min (measured 2026-11-24)', or 'not measured yet'."""
    measured = latest(record, notebook, preset)
    return NOT_MEASURED if measured is None else f"{cell(record, notebook, preset)} (measured {measured[0]})"


def render_notebook_table(text: str, record: dict, notebook: str) -> str:
    """A notebook's first cell with the last cell of each runtime-table row that names a preset (`cpu`) rendered."""
    out = []
    for line in text.split("\n"):
        match = re.match(r"^\| [^|]+ \| `([a-z0-9-]+)`[^|]* \|", line)
        if match and match[1] in COLUMNS:
            cells = line.strip().strip("|").split(" | ")
            cells[-1] = notebook_cell(record, notebook, match[1])
            line = "| " + " | ".join(c.strip() for c in cells) + " |"
        out.append(line)
    return "\n".join(out)


def render_notebooks(record: dict, root: Path = REPO_ROOT) -> list[Path]:
    """Rewrite the runtime table of every numbered notebook whose table differs from the record; returns them."""
    import nbformat

    changed = []
    for path in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        first = notebook.cells[0]
        rendered = render_notebook_table(first.source, record, path.stem)
        if rendered != first.source:
            first.source = rendered
            nbformat.write(notebook, path)
            changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("summaries", nargs="*", type=Path, help="runs/<time>/summary.json files from make course")
    args = parser.parse_args(argv)
    record = load_record()
    for summary in args.summaries:
        print(f"{summary}: {add_summary(record, summary)} passing notebook(s) recorded")
    RECORD.parent.mkdir(parents=True, exist_ok=True)
    RECORD.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    README.write_text(render_readme(README.read_text(), record))
    changed = render_notebooks(record)
    print(f"README runtime columns and {len(changed)} notebook table(s) rewritten from {RECORD.relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
