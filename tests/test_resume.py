"""Interrupted GRPO training resumes from its last checkpoint and ends where an uninterrupted run ends.

A run is stopped after step 2 of 4 (as a closed laptop or a killed Colab runtime would stop it), a new
trainer resumes it with ``resume_from_checkpoint=True``, and the result is compared with the same run done
in one go: the same final step, a log with every step exactly once, and the same logged rewards and weights.
It trains the tiny stub model (conftest), because resuming is the trainer's logic, not the model's: with the
course model the same test took 43 s of every `make test` (2026-12-01), with the stub 7 s with pytest's start-up.
"""

import torch
from transformers import LlamaForCausalLM, TrainerCallback, set_seed
from trl import GRPOTrainer

from course_utils.data import length_prompts
from course_utils.hardware import Hardware
from course_utils.presets import get_preset
from course_utils.recipes import SYSTEM_PROMPT, TARGET_CHARS, length_recipe_config
from course_utils.rewards import make_length_reward

STEPS = 4
CPU = Hardware(kind="cpu", device="cpu", name="CPU")


class StopAfter(TrainerCallback):
    """Stop training after ``step`` optimizer steps, as an interruption would."""

    def __init__(self, step):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= self.step:
            control.should_training_stop = True


class RecordSteps(TrainerCallback):
    """Remember which optimizer steps this trainer actually ran."""

    def __init__(self):
        self.steps = []

    def on_step_end(self, args, state, control, **kwargs):
        self.steps.append(state.global_step)


def _trainer(output_dir, config, tokenizer, callbacks=()):
    set_seed(0)
    model = LlamaForCausalLM(config)  # the same start weights for every trainer: seeded just above
    config = length_recipe_config(  # notebook 01's recipe at a tiny size, without the KL term, saving every 2 steps
        get_preset("cpu-ci", CPU).with_overrides(
            num_generations=2, per_device_train_batch_size=4, max_completion_length=8, max_steps=STEPS
        ),
        str(output_dir),
        beta=0.0,
        save_strategy="steps",
        save_steps=2,
        disable_tqdm=True,
    )
    data = length_prompts(seed=0, n_train=16, n_test=4, system_prompt=SYSTEM_PROMPT)
    return GRPOTrainer(
        model=model,
        reward_funcs=make_length_reward(TARGET_CHARS, max_completion_length=8),
        args=config,
        train_dataset=data["train"],
        processing_class=tokenizer,
        callbacks=list(callbacks),
    )


def _steps_and_rewards(trainer):
    return [(row["step"], row["reward"]) for row in trainer.state.log_history if "reward" in row]


def test_a_stopped_run_resumes_to_the_same_end(tmp_path, tiny_config, tiny_tokenizer):
    straight = _trainer(tmp_path / "straight", tiny_config, tiny_tokenizer)
    straight.train()

    interrupted = _trainer(tmp_path / "resumed", tiny_config, tiny_tokenizer, callbacks=[StopAfter(2)])
    interrupted.train()
    assert interrupted.state.global_step == 2
    assert (tmp_path / "resumed" / "checkpoint-2").is_dir()

    ran = RecordSteps()
    resumed = _trainer(tmp_path / "resumed", tiny_config, tiny_tokenizer, callbacks=[ran])
    resumed.train(resume_from_checkpoint=True)  # the latest checkpoint in output_dir

    assert ran.steps == [3, 4], "the resumed trainer must run only the steps the interruption left"
    assert resumed.state.global_step == straight.state.global_step == STEPS
    logged = _steps_and_rewards(resumed)
    assert [step for step, _ in logged] == list(range(1, STEPS + 1)), "every step logged exactly once"
    assert logged == _steps_and_rewards(straight), "the resumed run logged what the uninterrupted run logged"
    for (name, a), b in zip(straight.model.named_parameters(), resumed.model.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-6), f"{name} differs after resuming"
