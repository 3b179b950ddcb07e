"""Step cost: seconds per optimizer step of one recipe, where they go, and peak memory.

TRL 1.16 logs a ``step_time``, but of ``training_step`` alone (no gradient clipping, optimizer or scheduler
step), and its profiler's times (``profiling/Time taken: ...``) go to wandb, MLflow or Trackio, never to
``log_history``. So a callback times whole optimizer steps, and :func:`time_private_methods` the two private
methods in which a step generates and scores.
"""

from __future__ import annotations

import resource
import sys
import time

from benchmarks.recipes import LEVERS, build_trainer

#: ``_generate_and_score_completions`` calls ``_generate`` (sampling), then computes the rewards and the old
#: and reference log-probabilities: scoring is the outer time minus the inner one.
TIMED_METHODS = ("_generate", "_generate_and_score_completions")


def time_private_methods(trainer, names: tuple[str, ...] = TIMED_METHODS) -> dict[str, float]:
    """Wrap the methods ``names`` of ``trainer``; the dict returned holds the seconds spent in each so far.

    They are TRL internals: when a TRL release renames one, this raises instead of timing nothing.
    """
    missing = [name for name in names if not callable(getattr(trainer, name, None))]
    if missing:
        import trl

        raise RuntimeError(
            f"TRL {trl.__version__}'s {type(trainer).__name__} has no {missing}, through which the step cost times "
            "generation and scoring: find where this TRL version does them and update TIMED_METHODS in "
            "benchmarks/step_cost.py."
        )
    seconds = dict.fromkeys(names, 0.0)

    def timed(name, method):
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                seconds[name] += time.perf_counter() - start

        return wrapper

    for name in names:
        setattr(trainer, name, timed(name, getattr(trainer, name)))
    return seconds


def measure(recipe: str, preset_name: str, steps: int, output_dir: str, lever: str | None = None) -> dict:
    """Seconds per step and where they go, over ``steps`` steps after a warm-up step that is not counted."""
    from transformers import TrainerCallback

    trainer, _, _, preset, hardware = build_trainer(recipe, preset_name, steps + 1, output_dir, lever)
    seconds = time_private_methods(trainer)
    ends = []  # at each step's end: wall clock, seconds generating, seconds generating and scoring

    class StepEnds(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            ends.append((time.perf_counter(), *seconds.values()))

    trainer.add_callback(StepEnds())
    trainer.train()
    (start, gen0, both0), (stop, gen1, both1) = ends[0], ends[-1]  # from the warm-up step's end to the last's
    timed = len(ends) - 1
    step, gen = (stop - start) / timed, (gen1 - gen0) / timed
    score = (both1 - both0) / timed - gen
    if hardware.device == "cuda":
        import torch

        peak = torch.cuda.max_memory_allocated() / 2**20
    else:  # ru_maxrss is in bytes on macOS, KiB on Linux
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (2**20 if sys.platform == "darwin" else 2**10)
    a = trainer.args
    completions = a.per_device_train_batch_size * a.gradient_accumulation_steps
    return {
        "recipe": recipe, "lever": lever or "", "preset": preset.name, "device": hardware.name, "steps_timed": timed,
        "seconds_per_step": step, "steps_per_second": 1 / step, "completions_per_second": completions / step,
        "share_generate": gen / step, "share_score": score / step,
        "share_loss_backward_optimizer": 1 - (gen + score) / step,
        "peak_memory_mb": peak, "memory_kind": "CUDA max allocated" if hardware.device == "cuda" else "RSS",
        "num_generations": a.num_generations, "completions_per_step": completions,
        "max_completion_length": a.max_completion_length, "activation_checkpointing": a.activation_checkpointing,
        "beta": a.beta, "bf16": a.bf16, "num_iterations": a.num_iterations,
        "steps_per_generation": a.steps_per_generation, "lora": lever is not None and LEVERS[lever] == "lora",
    }  # fmt: skip
