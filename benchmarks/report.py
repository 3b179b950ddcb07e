"""The benchmark's report: one run's results as markdown (tables and the ratios they support), JSON and CSV.

A run is the dict saved as ``latest.json``: ``started``, ``command``, ``environment``, and the lists
``step_cost``, ``levers``, ``generation_probe`` (markdown table lines) and ``time_to_learn``.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

SHARES = ["generate", "score + ref/old log-probs", "loss, backward, optimizer", "peak memory"]


def write(out: Path, run: dict) -> str:
    """Write ``latest.md``, ``latest.json`` and a CSV per measured table into ``out``; return the markdown."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "latest.md").write_text(markdown := render(run))
    (out / "latest.json").write_text(json.dumps(run, indent=1))
    for name in ("step_cost", "levers", "time_to_learn"):
        if run[name]:
            with open(out / f"{name}.csv", "w", newline="") as f:
                fields = [k for k in run[name][0] if k != "curve"]  # the learning curve stays in the JSON
                writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
                writer.writeheader()
                writer.writerows(run[name])
    return markdown


def _table(title: str, columns: list[str], rows: list[str]) -> list[str]:
    return ["", f"### {title}", "", f"| {' | '.join(columns)} |", "|" + "---|" * len(columns), *rows]


def _shares(c: dict) -> str:
    return (f"{c['share_generate']:.0%} | {c['share_score']:.0%} | {c['share_loss_backward_optimizer']:.0%} | "
            f"{c['peak_memory_mb']:.0f} MB {c['memory_kind']}")  # fmt: skip


def _learn_ratio(course: dict, other: dict, other_name: str) -> str | None:
    """The line "Course / other, time to learn: **r** (why)"; None when the course recipe did not get there."""
    if not course["reached"]:
        return None
    if other["reached"]:
        ratio, note = f"{course['seconds_to_halve'] / other['seconds_to_halve']:.2f}", "both recipes reached the goal"
    else:
        ratio = f"< {course['seconds_to_halve'] / other['final_seconds']:.2f}"
        note = f"{other_name} had not halved the error after {other['final_seconds'] / 60:.1f} min"
    return f"Course / {other_name}, time to learn: **{ratio}** ({note})"


def render(run: dict) -> str:
    """The markdown report of one run, with ratios only between recipes that were measured."""
    costs = {c["recipe"]: c for c in run["step_cost"]}
    course, defaults = costs.get("course"), costs.get("trl-defaults")
    lines = [f"## Benchmark run {run['started']}", "", f"`{run['command']}`", ""]
    lines.append(", ".join(f"{k} {v}" for k, v in run["environment"].items()))
    columns = ["recipe", "s/step", "steps/s", "completions/s", *SHARES, "activation checkpointing", "beta"]
    lines += _table("Step cost (same model, prompts, group size, batch and completion budget)", columns, [
        f"| {c['recipe']} ({c['num_generations']} × {c['completions_per_step'] // c['num_generations']}, "
        f"{c['max_completion_length']} tokens) | {c['seconds_per_step']:.2f} | {c['steps_per_second']:.3f} | "
        f"{c['completions_per_second']:.2f} | {_shares(c)} | {c['activation_checkpointing']} | {c['beta']} |"
        for c in run["step_cost"]
    ])  # fmt: skip
    if course and defaults:
        ratio = course["steps_per_second"] / defaults["steps_per_second"]
        lines += ["", f"Course recipe / TRL defaults, steps per second: **{ratio:.2f}×**"]
    if run["levers"]:
        title = "Levers: one change at a time to the course recipe (step cost, same sizes)"
        lines += _table(title, ["lever", "s/step", "× course recipe", *SHARES], [
            f"| {c['lever']} | {c['seconds_per_step']:.2f} | "
            + (f"{c['steps_per_second'] / course['steps_per_second']:.2f}×" if course else "–")
            + f" | {_shares(c)} |"
            for c in run["levers"]
        ])  # fmt: skip
        if defaults:
            best = max(run["levers"], key=lambda c: c["steps_per_second"])
            ratio = best["steps_per_second"] / defaults["steps_per_second"]
            lines += ["", f"Fastest lever ({best['lever']}) / TRL defaults, steps per second: **{ratio:.2f}×**"]
    if run["generation_probe"]:
        title = "Generation alone (`benchmarks/generation_probe.py`: 32 sampled tokens per completion)"
        lines += ["", f"### {title}", "", *run["generation_probe"]]
    if run["time_to_learn"]:
        title = "Time to learn (held-out length error at most half the base model's; training time only)"
        columns = ["recipe", "base error", "reached", "steps", "training time", "last error (step, time)"]
        lines += _table(title, columns, [
            f"| {r['recipe']} | {r['base_error']:.1f} | {r['reached']} | "
            + (f"{r['steps_to_halve']} | {r['seconds_to_halve'] / 60:.1f} min" if r["reached"]
               else f"not within {r['cap_minutes']:g} min | –")
            + f" | {r['final_error']:.1f} (step {r['final_step']}, {r['final_seconds'] / 60:.1f} min) |"
            for r in run["time_to_learn"]
        ])  # fmt: skip
        learned = {r["recipe"]: r for r in run["time_to_learn"]}
        for name, label in (("hf-course", "the published course recipe"), ("trl-defaults", "TRL defaults")):
            if {"course", name} <= learned.keys() and (line := _learn_ratio(learned["course"], learned[name], label)):
                lines += ["", line]
    return "\n".join(lines) + "\n"
