"""Run the notebook tests side by side, as many at once as the cores and the memory allow (``make test``).

Each notebook is one pytest run of ``tests/test_notebooks.py`` (its node id), so a notebook passes or fails
exactly as under plain pytest. The scheduler only decides when each one starts:

- the longest recorded notebooks first (``benchmarks/results/runtimes.json``), so the short ones fill the gaps;
- at most ``--workers`` at once (default: one per core), each with its share of the cores (``OMP_NUM_THREADS``);
- a notebook starts only if its recorded peak memory fits beside the ones running (``doctor.NOTEBOOK_PEAK_GB``);
  where that budget is under 17.8 GB, 06 (9.1 GB) never runs beside 10 (8.7 GB). Alone, any notebook may start.

Why not pytest-xdist: its ``--dist loadgroup``, which would keep the heavy notebooks apart, is a silent no-op
under pytest 9.2, and its workers had loaded the real model in earlier tests (6.9 GB each) before they started
a notebook (docs/BENCHMARKS.md). Here the unit tests run first, in a process of their own.

Example: ``python scripts/notebook_tests.py --workers 2 -- --durations=5``
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "scripts"))  # doctor.py and notebook_runner.py, when loaded from elsewhere

from doctor import NOTEBOOK_PEAK_GB  # noqa: E402
from notebook_runner import course_notebooks  # noqa: E402

from benchmarks.runtimes import RECORD, load_record  # noqa: E402

TEST = "tests/test_notebooks.py::test_notebook_runs_and_learns_in_ci_mode"
#: Kept back from the memory available at the start: the pytest processes and the system.
RESERVE_GB = 3.0
#: The peak a notebook with no record counts with: the heaviest measured, so a new notebook starts alone.
UNMEASURED_GB = max(NOTEBOOK_PEAK_GB.values())


@dataclass(eq=False)  # compared and hashed by identity: the scheduler keys its running jobs by them
class Job:
    """One notebook's test: its name (the notebook's stem), recorded minutes and peak memory."""

    name: str
    minutes: float = float("inf")  # no record: treated as the longest, so it starts early
    peak_gb: float = UNMEASURED_GB
    beside: set[str] = field(default_factory=set)  # the notebooks that ran at the same time, for the report
    machine_gb: float = 0.0  # the most memory in use on the machine while it ran (sampled at each poll)


def ci_minutes(runtimes: Path = RECORD) -> dict[str, float]:
    """Each notebook's ``cpu-ci`` runtime in minutes: the longest run on its latest recorded day, as the README's
    column shows it. Rows marked ``superseded`` (measured on code that has changed since) do not count, so an old,
    slower version cannot put a notebook first. Empty without a record."""
    try:
        rows = load_record(runtimes)["measurements"]
    except (OSError, ValueError, KeyError):
        return {}
    by_day: dict[str, dict[str, list[float]]] = {}  # notebook -> day -> minutes of that day's runs
    for row in rows:
        if row.get("preset") == "cpu-ci" and not row.get("superseded"):
            days = by_day.setdefault(row["notebook"], {})
            days.setdefault(str(row.get("date", ""))[:10], []).append(float(row["minutes"]))
    return {name: max(days[max(days)]) for name, days in by_day.items()}


def plan(names: list[str], minutes: dict[str, float]) -> list[Job]:
    """The jobs, longest recorded first, each with its peak memory (``"06_grpo_from_scratch"`` -> 9.1 GB).

    A notebook with no record counts as the longest and the heaviest, so a new one is started early and alone.
    """
    jobs = [Job(n, minutes.get(n, float("inf")), NOTEBOOK_PEAK_GB.get(n[:2], UNMEASURED_GB)) for n in names]
    return sorted(jobs, key=lambda job: job.minutes, reverse=True)


def next_job(pending: list[Job], running: list[Job], budget_gb: float) -> Job | None:
    """The first pending job whose peak fits beside the running ones' peaks; the first one when none runs.

    >>> a, b, c = Job("12_x", 10, 11.9), Job("10_y", 9, 9.9), Job("01_z", 1, 6.9)
    >>> next_job([b, c], [a], budget_gb=20.5).name  # 11.9 + 9.9 = 21.8 does not fit; 11.9 + 6.9 = 18.8 does
    '01_z'
    """
    if not running:
        return pending[0] if pending else None
    used = sum(job.peak_gb for job in running)
    return next((job for job in pending if used + job.peak_gb <= budget_gb), None)


def run(jobs: list[Job], command, workers: int, budget_gb: float, env: dict[str, str], poll_s: float = 1.0) -> dict:
    """Run ``command(job)`` for every job under the rules above; return {name: (returncode, minutes, log text)}.

    A job's output goes to a file and is printed whole when it ends, so two jobs' lines never interleave.
    """
    pending, running, results = list(jobs), {}, {}
    with tempfile.TemporaryDirectory(prefix="notebook-tests-") as folder:  # the logs, removed at the end
        logs = Path(folder)
        try:
            while pending or running:
                while len(running) < workers and (job := next_job(pending, list(running), budget_gb)) is not None:
                    pending.remove(job)
                    for other in running:
                        other.beside.add(job.name)
                        job.beside.add(other.name)
                    log = (logs / f"{job.name}.log").open("w")
                    proc = subprocess.Popen(command(job), stdout=log, stderr=subprocess.STDOUT, env=env,
                                            cwd=REPO_ROOT, start_new_session=True)
                    running[job] = (proc, log, time.perf_counter())
                    beside = ", ".join(sorted(o.name for o in running if o is not job))
                    print(f"started {job.name} (peak ~{job.peak_gb:g} GB){' beside ' + beside if beside else ''}",
                          flush=True)
                time.sleep(poll_s)
                memory = psutil.virtual_memory()
                for job in running:
                    job.machine_gb = max(job.machine_gb, (memory.total - memory.available) / 1e9)
                for job, (proc, log, start) in list(running.items()):
                    if proc.poll() is None:
                        continue
                    log.close()
                    del running[job]
                    minutes = (time.perf_counter() - start) / 60
                    text = (logs / f"{job.name}.log").read_text(errors="replace")
                    results[job.name] = (proc.returncode, minutes, text)
                    verdict = "passed" if proc.returncode == 0 else f"FAILED (pytest exit code {proc.returncode})"
                    print(f"\n===== {job.name}: {verdict} in {minutes:.1f} min =====\n{text}", flush=True)
        finally:
            for proc, log, _ in running.values():  # interrupted: stop the jobs and their kernels
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
                log.close()
    return results


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=0, help="notebooks at once (0: one per core)")
    parser.add_argument("--notebooks", nargs="+", default=None, help="names or paths (default: every notebook)")
    parser.add_argument("pytest_args", nargs="*", help="passed to every pytest run (after --)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    workers = max(1, min(args.workers or cores, cores))
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    env.setdefault("OMP_NUM_THREADS", str(max(1, cores // workers)))
    budget_gb = psutil.virtual_memory().available / 1e9 - RESERVE_GB
    names = [p.stem for p in course_notebooks()]
    unknown = sorted({Path(n).stem for n in args.notebooks or ()} - set(names))
    if unknown:
        print(f"--notebooks: no notebook named {unknown}; the notebooks are {names}", file=sys.stderr)
        return 2
    jobs = plan([n for n in names if args.notebooks is None or n in {Path(a).stem for a in args.notebooks}],
                ci_minutes())
    print(f"{len(jobs)} notebooks, {workers} at a time with {env['OMP_NUM_THREADS']} thread(s) each; memory for "
          f"notebooks side by side: {budget_gb:.1f} GB (available now, less {RESERVE_GB:g} GB)", flush=True)
    start = time.perf_counter()
    results = run(jobs, lambda job: [sys.executable, "-m", "pytest", f"{TEST}[{job.name}]", *args.pytest_args],
                  workers, budget_gb, env)
    wall = (time.perf_counter() - start) / 60
    total_gb = psutil.virtual_memory().total / 1e9
    print(f"\n{'notebook':<36} {'result':<6} {'minutes':>7} {'memory in use':>14}  ran beside")
    for job in jobs:
        code, minutes, _ = results.get(job.name, (None, 0.0, ""))
        result = "pass" if code == 0 else "FAIL"
        beside = ", ".join(sorted(n[:2] for n in job.beside)) or "-"
        print(f"{job.name:<36} {result:<6} {minutes:>7.1f} {job.machine_gb:>8.1f} GB  {beside}")
    print(f"(memory in use: the most on the whole machine, of {total_gb:.1f} GB, while the notebook ran)")
    failed = [name for name, (code, _, _) in results.items() if code != 0]
    total = sum(minutes for _, minutes, _ in results.values())
    print(f"\n{len(results) - len(failed)} passed, {len(failed)} failed in {wall:.1f} min; the runs add up to "
          f"{total:.1f} min with {env['OMP_NUM_THREADS']} thread(s) each")
    return 1 if failed or len(results) < len(jobs) else 0


if __name__ == "__main__":
    sys.exit(main())
