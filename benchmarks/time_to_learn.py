"""Time to learn notebook 01's task: training time until the held-out length error is half the base model's.

The error is measured greedily on the notebook's held-out prompts every ``eval_every`` steps, and evaluation
time is not counted. A recipe that has not halved it within ``minutes`` of training stops with its error.
"""

from __future__ import annotations

import time

from benchmarks.recipes import build_trainer
from course_utils.recipes import TARGET_CHARS


def measure(recipe: str, preset_name: str, minutes: float, eval_every: int, output_dir: str) -> dict:
    """Train until the held-out length error halves or ``minutes`` of training time run out."""
    from transformers import TrainerCallback

    from course_utils.evaluation import generate, length_report

    trainer, tokenizer, data, preset, hardware = build_trainer(recipe, preset_name, 10_000, output_dir)

    def held_out_error() -> float:
        completions, finished = generate(trainer.model, tokenizer, data["test"]["prompt"],
                                         max_new_tokens=preset.max_completion_length,
                                         batch_size=preset.eval_batch_size, progress=False)  # fmt: skip
        return length_report(completions, TARGET_CHARS, finished)["length_error"].mean

    base_error, curve, reached = held_out_error(), [], None  # curve: (step, training seconds, error)

    class LearnClock(TrainerCallback):
        seconds, start = 0.0, 0.0

        def on_step_begin(self, args, state, control, **kwargs):
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            nonlocal reached
            self.seconds += time.perf_counter() - self.start
            if state.global_step % eval_every == 0:
                trainer.model.eval()
                curve.append((state.global_step, self.seconds, held_out_error()))
                trainer.model.train()
                if curve[-1][2] <= base_error / 2:
                    reached, control.should_training_stop = curve[-1], True
            if self.seconds >= minutes * 60:
                control.should_training_stop = True

    trainer.add_callback(LearnClock())
    trainer.train()
    last = curve[-1] if curve else (0, 0.0, base_error)
    return {
        "recipe": recipe, "preset": preset.name, "device": hardware.name, "base_error": base_error,
        "reached": reached is not None, "steps_to_halve": reached[0] if reached else None,
        "seconds_to_halve": reached[1] if reached else None,
        "final_step": last[0], "final_seconds": last[1], "final_error": last[2],
        "cap_minutes": minutes, "eval_every": eval_every, "curve": curve,
    }  # fmt: skip
