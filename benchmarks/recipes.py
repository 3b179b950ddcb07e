"""The recipes the benchmark compares, at a preset's sizes, and the trainer for one of them.

``trl-defaults`` (TRL's ``GRPOConfig`` defaults, the preset's sizes, the hardware's precision), ``course``
(notebook 01's recipe, :mod:`course_utils.recipes`, with at most one of :data:`LEVERS`) and ``hf-course`` (the
Hugging Face LLM course's GRPO exercise, adapted only where current TRL and the hardware require it).
"""

from __future__ import annotations

import importlib.util

from course_utils.hardware import Hardware, cpu_has_native_bf16
from course_utils.presets import Preset
from course_utils.recipes import SYSTEM_PROMPT, TARGET_CHARS, length_recipe_config

#: One change at a time to the course's recipe; "lora" attaches notebook 05's adapter (:func:`lora_r16`).
LEVERS: dict[str, dict | str] = {
    "beta=0 (no reference model)": {"beta": 0.0},
    "bf16 autocast": {"bf16": True},
    "activation checkpointing on": {"activation_checkpointing": True},
    "steps_per_generation=2": {"steps_per_generation": 2},
    "num_iterations=2": {"num_iterations": 2},
    "LoRA r=16": "lora",
    "beta=0 + bf16 + num_iterations=2": {"beta": 0.0, "bf16": True, "num_iterations": 2},
    "bf16 + num_iterations=2": {"bf16": True, "num_iterations": 2},  # the fastest that keeps notebook 01's anchor
}


def lora_r16():
    """The adapter of the LLM course's exercise and of notebook 05: r=16, alpha=32 on all linear layers."""
    from peft import LoraConfig

    return LoraConfig(task_type="CAUSAL_LM", r=16, lora_alpha=32, target_modules="all-linear")


def applicable_levers(hardware: Hardware) -> list[str]:
    """The levers that change something here: bf16 only on a CPU with native bf16 (GPU presets already use it)."""
    native_bf16 = hardware.device == "cpu" and cpu_has_native_bf16()
    return [name for name, c in LEVERS.items() if native_bf16 or not (isinstance(c, dict) and "bf16" in c)]


def recipe_config(recipe: str, preset: Preset, output_dir: str, max_steps: int, hardware: Hardware, lever=None):
    """``(GRPOConfig, peft_config or None, reward)`` for a recipe at this preset's sizes, with one of
    :data:`LEVERS` applied to the course's recipe when ``lever`` is given."""
    from trl import GRPOConfig

    from course_utils.rewards import make_length_reward

    if lever is not None and recipe != "course":
        raise ValueError(f"levers apply to the course recipe, not {recipe!r}")
    run = dict(output_dir=output_dir, max_steps=max_steps, report_to="none", seed=0, disable_tqdm=True)
    precision = {"bf16": preset.bf16, "fp16": preset.fp16}
    if recipe == "course":
        change = LEVERS[lever] if lever is not None else {}
        lora, change = (lora_r16(), {}) if change == "lora" else (None, dict(change))
        if change.get("bf16") and hardware.device == "cpu":
            change["use_cpu"] = True  # transformers refuses bf16 on a CPU unless told it is one
        config = length_recipe_config(preset, **run, **{**precision, **change})
        return config, lora, make_length_reward(TARGET_CHARS, max_completion_length=preset.max_completion_length)
    run.update(precision, logging_steps=1, save_strategy="no")
    if recipe == "trl-defaults":
        sizes = ("num_generations", "per_device_train_batch_size", "max_completion_length")
        return GRPOConfig(**run, **{k: getattr(preset, k) for k in sizes}), None, make_length_reward(TARGET_CHARS)
    if recipe != "hf-course":
        raise ValueError(f"Unknown recipe {recipe!r}; choose trl-defaults, course or hf-course.")
    # The exercise, minus what no longer exists or cannot run here: max_prompt_length (removed from TRL),
    # optim="adamw_8bit" (bitsandbytes, CUDA only), bf16=True (only where the hardware has it), report_to="wandb".
    eight_bit = hardware.device == "cuda" and importlib.util.find_spec("bitsandbytes") is not None
    config = GRPOConfig(**run, learning_rate=2e-5, per_device_train_batch_size=8, gradient_accumulation_steps=2,
                        max_completion_length=96, num_generations=8,
                        optim="adamw_8bit" if eight_bit else "adamw_torch")  # fmt: skip

    def reward_len(completions, **kwargs):  # the exercise's reward, for chat completions
        return [-abs(TARGET_CHARS - len(c[-1]["content"])) for c in completions]

    return config, lora_r16(), reward_len


def build_trainer(recipe: str, preset_name: str, max_steps: int, output_dir: str, lever: str | None = None):
    """``(GRPOTrainer, tokenizer, notebook 01's data, preset, hardware)`` for one recipe, seeded, quiet."""
    from transformers import PrinterCallback, set_seed
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
    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=config, train_dataset=data["train"],
                          processing_class=tokenizer, peft_config=lora)  # fmt: skip
    trainer.remove_callback(PrinterCallback)  # disable_tqdm adds it: a log line per step in the driver's output
    return trainer, tokenizer, data, preset, hardware
