"""A short supervised warm start: show the model the answer format before GRPO.

Notebook 02 builds this step in the open with TRL's ``SFTTrainer`` and explains why it is needed (a
model that never writes the format gives a format reward zero variance, so GRPO learns nothing).
Later notebooks call :func:`supervised_warm_start` instead of repeating that code.
"""

from __future__ import annotations

import contextlib
import io

from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from trl import SFTConfig, SFTTrainer

from course_utils.data import worked_examples
from course_utils.presets import Preset


def supervised_warm_start(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    train_rows: Dataset,
    *,
    preset: Preset,
    n_examples: int = 32,
    steps: int = 4,
    learning_rate: float = 3e-5,
    system_prompt: str | None = None,
    seed: int = 0,
    output_dir: str = "outputs/warm_start",
) -> PreTrainedModel:
    """Fine-tune ``model`` in place on ``n_examples`` worked solutions from ``train_rows``; return it.

    The defaults are notebook 02's measured recipe for the course model: weak on purpose (about two thirds
    of greedy answers formatted, a fifth to a third when sampling), so GRPO still sees variance.
    ``train_rows`` needs ``question``, ``answer`` and ``reasoning`` columns (see ``arithmetic_problems``).
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}; to skip the warm start, do not call this function.")
    examples = worked_examples(train_rows, n=n_examples, system_prompt=system_prompt)
    config = SFTConfig(
        output_dir=output_dir,
        max_steps=steps,
        per_device_train_batch_size=8,
        learning_rate=learning_rate,
        lr_scheduler_type="constant",
        bf16=preset.bf16,
        fp16=preset.fp16,
        activation_checkpointing=False,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=seed,
        disable_tqdm=True,
    )
    trainer = SFTTrainer(model=model, args=config, train_dataset=examples, processing_class=tokenizer)
    with contextlib.redirect_stdout(io.StringIO()):  # the per-step loss dicts are not the lesson here
        trainer.train()
    return trainer.model
