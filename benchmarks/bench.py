#!/usr/bin/env python
"""The course's benchmark: step cost and time to learn, side by side, on this machine, in one run.

    python benchmarks/bench.py [--preset auto] [--steps 4] [--learn-minutes 12] [--out benchmarks/results]

1. **Step cost** of GRPO with TRL's ``GRPOConfig`` defaults against the course's recipe for this hardware
   (notebook 01's): the same model, prompts, group size, batch and completion budget; only what the
   hardware requires (precision) is changed in the defaults. Seconds per optimizer step, completions per
   second, the share of a step spent generating, scoring (reward and reference/old log-probabilities) and
   computing the loss, backward and optimizer step, and peak memory (RSS on the CPU, CUDA max allocated on
   a GPU).
2. **Time to learn** notebook 01's task: training wall time until the held-out length error (greedy, the
   notebook's held-out prompts) is at most half the base model's, for the course's recipe and for the
   recipe of the Hugging Face LLM course's GRPO exercise (LoRA r=16/alpha=32 on all linear layers, lr 2e-5,
   8 generations, 96-token completions, reward -|50 - len|, batch 8 × 2 accumulation), adapted only where
   current TRL and the hardware require. Evaluation time is not counted; a recipe that has not halved the
   error within ``--learn-minutes`` of training is reported as not reached, with the error it got to.

Each measurement runs in its own process (so peak memory is its own). Results are written as markdown and
CSV, with the machine, the library versions and the command line.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

TARGET_CHARS = 50
SYSTEM_PROMPT = "Answer in one short sentence."


# ----------------------------------------------------------------------------------------------- recipes
#: One change at a time to the course's recipe, each timed like the recipes (the issue's "things worth
#: measuring"). "lora" attaches notebook 05's adapter (r=16, alpha=32, all linear layers).
LEVERS: dict[str, dict | str] = {
    "beta=0 (no reference model)": {"beta": 0.0},
    "bf16 autocast": {"bf16": True},
    "activation checkpointing on": {"activation_checkpointing": True},
    "steps_per_generation=2": {"steps_per_generation": 2},
    "num_iterations=2": {"num_iterations": 2},
    "LoRA r=16": "lora",
    "beta=0 + bf16 + num_iterations=2": {"beta": 0.0, "bf16": True, "num_iterations": 2},
}


def lora_r16():
    """The adapter of the LLM course's exercise and of notebook 05: r=16, alpha=32 on all linear layers."""
    from peft import LoraConfig

    return LoraConfig(task_type="CAUSAL_LM", r=16, lora_alpha=32, target_modules="all-linear")


def cpu_has_native_bf16() -> bool:
    """AMX or AVX512-BF16: the CPUs on which bfloat16 matrix products are faster than float32 ones."""
    import torch

    return bool(torch.cpu._is_amx_tile_supported() or torch.cpu._is_avx512_bf16_supported())


def applicable_levers(hardware) -> list[str]:
    """The levers that change something here: bf16 only on a CPU with native bf16 (GPU presets already use it)."""
    native_bf16 = hardware.device == "cpu" and cpu_has_native_bf16()
    uses_bf16 = {name for name, change in LEVERS.items() if isinstance(change, dict) and "bf16" in change}
    return [name for name in LEVERS if native_bf16 or name not in uses_bf16]


def recipe_config(recipe: str, preset, output_dir: str, max_steps: int, hardware, lever: str | None = None):
    """``(GRPOConfig, peft_config or None, reward)`` for a recipe at this preset's sizes, with one of
    :data:`LEVERS` applied to the course's recipe when ``lever`` is given."""
    from trl import GRPOConfig

    from course_utils.rewards import make_length_reward

    precision = {"bf16": hardware.bf16, "fp16": hardware.fp16}
    common = dict(
        output_dir=output_dir,
        max_steps=max_steps,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=0,
        disable_tqdm=True,
    )
    sizes = dict(
        num_generations=preset.num_generations,
        per_device_train_batch_size=preset.per_device_train_batch_size,
        max_completion_length=preset.max_completion_length,
    )
    if lever is not None and recipe != "course":
        raise ValueError(f"levers apply to the course recipe, not {recipe!r}")
    if recipe == "trl-defaults":
        return GRPOConfig(**common, **sizes, **precision), None, make_length_reward(TARGET_CHARS)
    if recipe == "course":  # notebook 01's GRPOConfig, keyword for keyword
        recipe_kwargs = dict(
            learning_rate=5e-5,
            lr_scheduler_type="constant",
            temperature=1.0,
            beta=0.04,
            activation_checkpointing=preset.activation_checkpointing,
        )
        change = LEVERS[lever] if lever is not None else {}
        lora = None
        if change == "lora":
            lora, change = lora_r16(), {}
        if change.get("bf16") and hardware.device == "cpu":
            change = {**change, "use_cpu": True}  # transformers refuses bf16 on a CPU unless told it is one
        config = GRPOConfig(**common, **sizes, **{**precision, **recipe_kwargs, **change})
        return config, lora, make_length_reward(TARGET_CHARS, max_completion_length=preset.max_completion_length)
    if recipe == "hf-course":
        # The LLM course's exercise, minus what no longer exists or cannot run here: max_prompt_length
        # (removed from TRL), optim="adamw_8bit" (bitsandbytes, CUDA only: adamw_torch on a CPU),
        # bf16=True (only where the hardware has it), report_to="wandb".
        config = GRPOConfig(
            **common,
            **precision,
            learning_rate=2e-5,
            per_device_train_batch_size=8,
            gradient_accumulation_steps=2,
            max_completion_length=96,
            num_generations=8,
            optim="adamw_8bit" if hardware.device == "cuda" and _has("bitsandbytes") else "adamw_torch",
        )
        lora = lora_r16()

        def reward_len(completions, **kwargs):  # the exercise's reward, for chat completions
            return [-abs(TARGET_CHARS - len(c[-1]["content"])) for c in completions]

        return config, lora, reward_len
    raise ValueError(f"Unknown recipe {recipe!r}; choose trl-defaults, course or hf-course.")


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


# ----------------------------------------------------------------------------------------------- workers
def _peak_memory_mb(device: str) -> float:
    if device == "cuda":
        import torch

        return torch.cuda.max_memory_allocated() / 2**20
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10  # bytes on macOS, KiB on Linux


def _build(recipe: str, preset_name: str, max_steps: int, output_dir: str, callbacks=(), lever: str | None = None):
    from transformers import set_seed
    from trl import GRPOTrainer

    from course_utils.data import length_prompts
    from course_utils.hardware import detect_hardware
    from course_utils.models import load_model
    from course_utils.presets import get_preset

    hardware = detect_hardware()
    preset = get_preset(preset_name, hardware)
    set_seed(0)
    model, tokenizer = load_model("auto", hardware=hardware, verbose=False)
    data = length_prompts(seed=0, n_test=preset.n_eval, system_prompt=SYSTEM_PROMPT)
    config, lora, reward = recipe_config(recipe, preset, output_dir, max_steps, hardware, lever)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=config,
        train_dataset=data["train"],
        processing_class=tokenizer,
        peft_config=lora,
        callbacks=list(callbacks),
    )
    return trainer, tokenizer, data, preset, hardware


class _Timer:
    """Accumulate the wall time spent inside a wrapped method."""

    def __init__(self, obj, name):
        self.seconds, inner = 0.0, getattr(obj, name)

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        setattr(obj, name, timed)


def worker_step_cost(recipe: str, preset_name: str, steps: int, output_dir: str, lever: str | None = None) -> dict:
    """Seconds per step and where they go, after one warm-up step that is not counted."""
    from transformers import TrainerCallback

    class StepClock(TrainerCallback):
        def __init__(self):
            self.begin, self.durations, self.marks = 0.0, [], []

        def on_step_begin(self, args, state, control, **kwargs):
            self.begin = time.perf_counter()
            self.marks.append((generating.seconds, scoring.seconds))

        def on_step_end(self, args, state, control, **kwargs):
            self.durations.append(time.perf_counter() - self.begin)
            self.marks[-1] = (generating.seconds - self.marks[-1][0], scoring.seconds - self.marks[-1][1])

    clock = StepClock()
    trainer, _, _, preset, hardware = _build(recipe, preset_name, steps + 1, output_dir, [clock], lever)
    generating = _Timer(trainer, "_generate")
    scoring = _Timer(trainer, "_generate_and_score_completions")  # includes generating
    trainer.train()
    durations, marks = clock.durations[1:], clock.marks[1:]  # drop the warm-up step
    step = sum(durations) / len(durations)
    gen = sum(m[0] for m in marks) / len(marks)
    score = sum(m[1] for m in marks) / len(marks) - gen
    completions = trainer.args.per_device_train_batch_size * trainer.args.gradient_accumulation_steps
    return {
        "recipe": recipe,
        "lever": lever or "",
        "preset": preset.name,
        "device": hardware.name,
        "steps_timed": len(durations),
        "seconds_per_step": step,
        "steps_per_second": 1 / step,
        "completions_per_second": completions / step,
        "share_generate": gen / step,
        "share_score": score / step,
        "share_loss_backward_optimizer": 1 - (gen + score) / step,
        "peak_memory_mb": _peak_memory_mb(hardware.device),
        "memory_kind": "CUDA max allocated" if hardware.device == "cuda" else "RSS",
        "num_generations": trainer.args.num_generations,
        "completions_per_step": completions,
        "max_completion_length": trainer.args.max_completion_length,
        "activation_checkpointing": trainer.args.activation_checkpointing,
        "beta": trainer.args.beta,
        "bf16": trainer.args.bf16,
        "num_iterations": trainer.args.num_iterations,
        "steps_per_generation": trainer.args.steps_per_generation,
        "lora": lever is not None and LEVERS[lever] == "lora",
    }


def worker_time_to_learn(recipe: str, preset_name: str, minutes: float, eval_every: int, output_dir: str) -> dict:
    """Train until the held-out length error halves or ``minutes`` of training time run out."""
    from transformers import TrainerCallback

    from course_utils.evaluation import generate, length_report

    state = {"train_seconds": 0.0, "start": 0.0, "curve": [], "reached": None}

    def held_out_error(model, tokenizer, data, preset):
        completions, finished = generate(
            model,
            tokenizer,
            data["test"]["prompt"],
            max_new_tokens=preset.max_completion_length,
            batch_size=preset.eval_batch_size,
            progress=False,
        )
        return length_report(completions, TARGET_CHARS, finished)["length_error"].mean

    class LearnClock(TrainerCallback):
        def on_step_begin(self, args, st, control, **kwargs):
            state["start"] = time.perf_counter()

        def on_step_end(self, args, st, control, model=None, **kwargs):
            state["train_seconds"] += time.perf_counter() - state["start"]
            if st.global_step % eval_every == 0:
                model.eval()
                error = held_out_error(model, tokenizer, data, preset)
                model.train()
                state["curve"].append((st.global_step, state["train_seconds"], error))
                if error <= base_error / 2:
                    state["reached"] = (st.global_step, state["train_seconds"], error)
                    control.should_training_stop = True
            if state["train_seconds"] >= minutes * 60:
                control.should_training_stop = True

    trainer, tokenizer, data, preset, hardware = _build(
        recipe, preset_name, 10_000, output_dir, callbacks=[LearnClock()]
    )
    base_error = held_out_error(trainer.model, tokenizer, data, preset)
    trainer.train()
    last = state["curve"][-1] if state["curve"] else (0, 0.0, base_error)
    reached = state["reached"]
    return {
        "recipe": recipe,
        "preset": preset.name,
        "device": hardware.name,
        "base_error": base_error,
        "reached": reached is not None,
        "steps_to_halve": reached[0] if reached else None,
        "seconds_to_halve": reached[1] if reached else None,
        "final_step": last[0],
        "final_seconds": last[1],
        "final_error": last[2],
        "cap_minutes": minutes,
        "eval_every": eval_every,
        "curve": state["curve"],
    }


# ----------------------------------------------------------------------------------------------- driver
def _offline_env() -> dict:
    """This environment with ``HF_HUB_OFFLINE=1`` unless the caller set it: workers load the local model."""
    return {**os.environ, "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1")}


def _run_worker(kind: str, args: list[str]) -> dict:
    command = [sys.executable, __file__, "--worker", kind, *args]
    print("  $", " ".join(command[1:]), flush=True)
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env=_offline_env(),
    )
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"benchmark worker {kind} {args} failed:\n{done.stderr[-3000:]}")


def _environment() -> dict:
    import importlib.metadata as md

    from course_utils.hardware import detect_hardware

    versions = {p: md.version(p) for p in ("torch", "transformers", "trl", "peft", "datasets")}
    return {
        "machine": f"{platform.machine()} {platform.system()}, {os.cpu_count()} CPUs, {detect_hardware().name}",
        "python": platform.python_version(),
        **versions,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="auto", help="hardware preset the sizes come from (default: auto)")
    parser.add_argument("--steps", type=int, default=4, help="timed steps per step-cost run (after 1 warm-up)")
    parser.add_argument("--learn-minutes", type=float, default=12.0, help="training-time cap per time-to-learn run")
    parser.add_argument("--eval-every", type=int, default=2, help="steps between held-out evaluations")
    parser.add_argument("--skip-learn", action="store_true", help="no time-to-learn runs")
    parser.add_argument("--skip-levers", action="store_true", help="no per-lever step-cost runs")
    parser.add_argument("--skip-probe", action="store_true", help="no generation probe (generation_probe.py)")
    parser.add_argument("--out", default=str(REPO_ROOT / "benchmarks" / "results"))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--recipe", help=argparse.SUPPRESS)
    parser.add_argument("--lever", help=argparse.SUPPRESS)
    parser.add_argument("--tmp", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        if args.worker == "step-cost":
            result = worker_step_cost(args.recipe, args.preset, args.steps, args.tmp, args.lever)
        else:
            result = worker_time_to_learn(args.recipe, args.preset, args.learn_minutes, args.eval_every, args.tmp)
        print(json.dumps(result))
        return 0

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "tmp"
    started = time.strftime("%Y-%m-%d %H:%M")
    options = " ".join(argv if argv is not None else sys.argv[1:])
    command = f"python benchmarks/bench.py {options}" if options else "python benchmarks/bench.py (default options)"
    env = _environment()
    common = [
        "--preset",
        args.preset,
        "--steps",
        str(args.steps),
        "--learn-minutes",
        str(args.learn_minutes),
        "--eval-every",
        str(args.eval_every),
    ]
    print(f"step cost ({args.steps} timed steps per recipe)")
    costs = [
        _run_worker("step-cost", [*common, "--recipe", r, "--tmp", str(tmp / r)]) for r in ("trl-defaults", "course")
    ]
    levers = []
    if not args.skip_levers:
        from course_utils.hardware import detect_hardware

        names = applicable_levers(detect_hardware())
        print(f"levers ({len(names)}, one change at a time to the course recipe)")
        levers = [
            _run_worker("step-cost", [*common, "--recipe", "course", "--lever", n, "--tmp", str(tmp / f"lever-{i}")])
            for i, n in enumerate(names)
        ]
    probe = []
    if not args.skip_probe:
        print("generation alone (benchmarks/generation_probe.py)")
        done = subprocess.run(
            [sys.executable, str(Path(__file__).with_name("generation_probe.py"))],
            capture_output=True,
            text=True,
            env=_offline_env(),
        )
        probe = [line for line in done.stdout.splitlines() if line.startswith("|")]
        if done.returncode or not probe:
            raise RuntimeError(f"generation probe failed:\n{done.stderr[-3000:]}")
    learns = []
    if not args.skip_learn:
        print(f"time to learn (cap {args.learn_minutes} min of training per recipe)")
        learns = [
            _run_worker("learn", [*common, "--recipe", r, "--tmp", str(tmp / f"learn-{r}")])
            for r in ("course", "trl-defaults", "hf-course")
        ]
    report = render(started, command, env, costs, learns, levers, probe)
    (out / "latest.md").write_text(report)
    (out / "latest.json").write_text(
        json.dumps(
            {
                "started": started,
                "command": command,
                "environment": env,
                "step_cost": costs,
                "levers": levers,
                "generation_probe": probe,
                "time_to_learn": learns,
            },
            indent=1,
        )
    )
    with open(out / "step_cost.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(costs[0]))
        writer.writeheader()
        writer.writerows(costs)
    if levers:
        with open(out / "levers.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(levers[0]))
            writer.writeheader()
            writer.writerows(levers)
    if learns:
        with open(out / "time_to_learn.csv", "w", newline="") as f:
            fields = [k for k in learns[0] if k != "curve"]
            writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(learns)
    print(report)
    return 0


def _learn_ratio(course: dict, other: dict, other_name: str) -> str | None:
    """The line "Course / other, time to learn: **r** (why)"; None when the course recipe did not get there."""
    if not course["reached"]:
        return None
    if other["reached"]:
        ratio = f"**{course['seconds_to_halve'] / other['seconds_to_halve']:.2f}**"
        note = "both recipes reached the goal"
    else:
        ratio = f"**< {course['seconds_to_halve'] / other['final_seconds']:.2f}**"
        note = f"{other_name} had not halved the error after {other['final_seconds'] / 60:.1f} min"
    return f"Course / {other_name}, time to learn: {ratio} ({note})"


def render(
    started: str,
    command: str,
    env: dict,
    costs: list[dict],
    learns: list[dict],
    levers: list[dict] = (),
    probe: list[str] = (),
) -> str:
    lines = [
        f"## Benchmark run {started}",
        "",
        f"`{command}`",
        "",
        ", ".join(f"{k} {v}" for k, v in env.items()),
        "",
        "### Step cost (same model, prompts, group size, batch and completion budget)",
        "",
        "| recipe | s/step | steps/s | completions/s | generate | score + ref/old log-probs "
        "| loss, backward, optimizer | peak memory | activation checkpointing | beta |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in costs:
        lines.append(
            f"| {c['recipe']} ({c['num_generations']} × {c['completions_per_step'] // c['num_generations']}, "
            f"{c['max_completion_length']} tokens) | {c['seconds_per_step']:.2f} | {c['steps_per_second']:.3f} | "
            f"{c['completions_per_second']:.2f} | {c['share_generate']:.0%} | {c['share_score']:.0%} | "
            f"{c['share_loss_backward_optimizer']:.0%} | {c['peak_memory_mb']:.0f} MB {c['memory_kind']} | "
            f"{c['activation_checkpointing']} | {c['beta']} |"
        )
    if len(costs) == 2:
        lines += [
            "",
            "Course recipe / TRL defaults, steps per second: "
            f"**{costs[1]['steps_per_second'] / costs[0]['steps_per_second']:.2f}×**",
        ]
    if levers:
        course = next((c for c in costs if c["recipe"] == "course"), None)
        lines += [
            "",
            "### Levers: one change at a time to the course recipe (step cost, same sizes)",
            "",
            "| lever | s/step | × course recipe | generate | score + ref/old log-probs | loss, backward, optimizer "
            "| peak memory |",
            "|---|---|---|---|---|---|---|",
        ]
        for c in levers:
            speedup = f"{c['steps_per_second'] / course['steps_per_second']:.2f}×" if course else "–"
            lines.append(
                f"| {c['lever']} | {c['seconds_per_step']:.2f} | {speedup} | {c['share_generate']:.0%} | "
                f"{c['share_score']:.0%} | {c['share_loss_backward_optimizer']:.0%} | "
                f"{c['peak_memory_mb']:.0f} MB {c['memory_kind']} |"
            )
        defaults = next((c for c in costs if c["recipe"] == "trl-defaults"), None)
        if defaults:
            best = max(levers, key=lambda c: c["steps_per_second"])
            lines += [
                "",
                f"Fastest lever ({best['lever']}) / TRL defaults, steps per second: "
                f"**{best['steps_per_second'] / defaults['steps_per_second']:.2f}×**",
            ]
    if probe:
        lines += ["", "### Generation alone (`benchmarks/generation_probe.py`: 32 sampled tokens per completion)", ""]
        lines += list(probe)
    if learns:
        lines += [
            "",
            "### Time to learn (held-out length error at most half the base model's; training time only)",
            "",
            "| recipe | base error | reached | steps | training time | last error (step, time) |",
            "|---|---|---|---|---|---|",
        ]
        for r in learns:
            when = f"{r['steps_to_halve']}" if r["reached"] else f"not within {r['cap_minutes']:g} min"
            secs = f"{r['seconds_to_halve'] / 60:.1f} min" if r["reached"] else "–"
            lines.append(
                f"| {r['recipe']} | {r['base_error']:.1f} | {r['reached']} | {when} | {secs} | "
                f"{r['final_error']:.1f} (step {r['final_step']}, {r['final_seconds'] / 60:.1f} min) |"
            )
        by_name = {r["recipe"]: r for r in learns}
        course = by_name.get("course")
        for name, label in (("hf-course", "the published course recipe"), ("trl-defaults", "TRL defaults")):
            line = _learn_ratio(course, by_name[name], label) if course and name in by_name else None
            if line:
                lines += ["", line]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
