"""Notebook 01's recipe, in one place for the code that runs it outside the notebook.

Notebook 01 writes its ``GRPOConfig`` out keyword by keyword, because that is the lesson. The script
``scripts/grpo_length.py`` (notebook 09), the benchmark and the tests run the same recipe and build it
here; ``tests/test_recipes.py`` reads notebook 01's cells and fails if the two ever differ.

The recipe: a length reward with a truncation penalty (:func:`course_utils.rewards.make_length_reward`),
``learning_rate=2e-5`` with a constant schedule, ``beta=0.04``, sampling at temperature 1, and the sizes and
precision of a :class:`course_utils.presets.Preset`.
"""

from __future__ import annotations

from typing import Any

from trl import GRPOConfig

from course_utils.presets import Preset

#: Notebook 01's parameters cell: the system prompt of its prompts, and the answer length it rewards.
SYSTEM_PROMPT = "Answer in one short sentence."
TARGET_CHARS = 50
#: High on purpose for a 135M model and a dozen steps (TRL's default is 1e-6; notebook 01, section 7).
LEARNING_RATE = 2e-5
#: KL anchor to the starting model (TRL's default is 0.0; notebook 01, section 7).
BETA = 0.04


def length_recipe_config(
    preset: Preset,
    output_dir: str,
    *,
    learning_rate: float = LEARNING_RATE,
    beta: float = BETA,
    report_to: str | list[str] = "none",
    seed: int = 0,
    **overrides: Any,
) -> GRPOConfig:
    """Notebook 01's ``GRPOConfig`` for ``preset``'s sizes; ``overrides`` add or change other keywords.

    >>> length_recipe_config(get_preset("cpu"), "outputs/run", max_steps=3, use_cpu=True)  # doctest: +SKIP
    """
    recipe = dict(
        output_dir=output_dir,
        learning_rate=learning_rate,
        lr_scheduler_type="constant",
        max_steps=preset.max_steps,
        num_generations=preset.num_generations,
        per_device_train_batch_size=preset.per_device_train_batch_size,
        max_completion_length=preset.max_completion_length,
        temperature=1.0,
        beta=beta,
        bf16=preset.bf16,
        fp16=preset.fp16,
        activation_checkpointing=preset.activation_checkpointing,
        logging_steps=1,
        save_strategy="no",
        report_to=report_to,
        seed=seed,
    )
    return GRPOConfig(**{**recipe, **overrides})
