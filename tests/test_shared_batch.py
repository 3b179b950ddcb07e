"""SharedFirstBatch (notebook 11): a replayed first batch trains exactly as sampling it would, and only then replays."""

import copy
import inspect

import pytest
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from course_utils.shared_batch import SharedFirstBatch

PROMPTS = Dataset.from_list([{"prompt": [{"role": "user", "content": f"w{i} w{i + 1}"}]} for i in range(4)])


def reward(completion_ids, **kwargs):  # spreads within a group, so every step has an advantage
    return [float(len(ids)) for ids in completion_ids]


def run(model, tokenizer, tmp_path, shared=None, seed=0, **keywords):
    """4 steps, 2 sampled batches (num_iterations=2): returns the trainer after training, and model.generate calls."""
    from transformers import set_seed

    set_seed(seed)
    args = GRPOConfig(output_dir=str(tmp_path), max_steps=4, num_iterations=2, per_device_train_batch_size=4,
                      num_generations=2, max_completion_length=6, learning_rate=1e-2, logging_steps=1,
                      save_strategy="no", report_to="none", use_cpu=True, bf16=False, seed=seed,
                      **keywords)  # fmt: skip
    policy = copy.deepcopy(model)
    calls = []
    original = policy.generate
    policy.generate = lambda *a, **k: calls.append(1) or original(*a, **k)
    trainer = GRPOTrainer(model=policy, reward_funcs=reward, args=args, train_dataset=PROMPTS,
                          processing_class=tokenizer)  # fmt: skip
    if shared is not None:
        shared.attach(trainer)
    trainer.train()
    return trainer, len(calls)


def losses(trainer):
    """Every logged number but the clock's, step by step."""
    clock = ("runtime", "per_second", "step_time", "total_flos")
    return [{k: v for k, v in row.items() if not any(c in k for c in clock)} for row in trainer.state.log_history]


def test_a_replayed_first_batch_trains_exactly_as_sampling_it(tiny_model, tiny_tokenizer, tmp_path):
    plain, plain_calls = run(tiny_model, tiny_tokenizer, tmp_path / "plain")
    shared = SharedFirstBatch()
    first, first_calls = run(tiny_model, tiny_tokenizer, tmp_path / "first", shared)  # records
    second, second_calls = run(tiny_model, tiny_tokenizer, tmp_path / "second", shared, loss_type="dapo")  # replays
    assert (plain_calls, first_calls, second_calls) == (2, 2, 1)  # 4 steps / num_iterations 2 = 2 batches
    assert shared.replayed == 1
    assert losses(first) == losses(plain)
    dapo, _ = run(tiny_model, tiny_tokenizer, tmp_path / "dapo", loss_type="dapo")  # the same run, sampling itself
    assert losses(second) == losses(dapo)
    for a, b in zip(second.model.parameters(), dapo.model.parameters(), strict=True):
        assert a.equal(b)


@pytest.mark.parametrize("change", ["seed", "temperature", "weights"])
def test_a_run_that_would_sample_another_batch_samples_it(tiny_model, tiny_tokenizer, tmp_path, change):
    shared = SharedFirstBatch()
    run(tiny_model, tiny_tokenizer, tmp_path / "first", shared)
    model, keywords = tiny_model, {}
    if change == "seed":
        keywords["seed"] = 1
    elif change == "temperature":
        keywords["temperature"] = 0.5
    else:
        model = copy.deepcopy(tiny_model)
        next(model.parameters()).data[0, 0] += 1e-3
    _, calls = run(model, tiny_tokenizer, tmp_path / "other", shared, **keywords)
    assert calls == 2 and shared.replayed == 0


def test_trl_still_samples_through_generate_single_turn():
    """SharedFirstBatch wraps this private method of TRL 1.16: its name and arguments are pinned here."""
    parameters = list(inspect.signature(GRPOTrainer._generate_single_turn).parameters)
    assert parameters == ["self", "prompt_ids", "images", "multimodal_fields", "num_generations", "has_tool_images"]
    assert "self._generate_single_turn(" in inspect.getsource(GRPOTrainer._generate)
