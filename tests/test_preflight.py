"""Preflight checks: each problem is caught before training, with a one-line error that names the fix."""

import pytest
from datasets import Dataset
from trl import GRPOConfig

from course_utils.hardware import Hardware
from course_utils.preflight import (
    PreflightError,
    check_batch,
    check_dataset,
    check_length_budget,
    check_pad_token,
    check_precision,
    context_length,
    preflight,
    reward_columns,
)
from course_utils.rewards import correctness_reward, make_length_reward, strict_format_reward

CPU = Hardware(kind="cpu", device="cpu", name="CPU")
T4 = Hardware(kind="t4", device="cuda", name="Tesla T4")
A100 = Hardware(kind="gpu", device="cuda", name="A100")

CHAT = [{"role": "user", "content": "What is 2 + 3?"}]


def chat_rows(n=4, **columns):
    return Dataset.from_dict({"prompt": [CHAT] * n, **{k: [v] * n for k, v in columns.items()}})


def config(output_dir, **overrides):
    values = dict(
        output_dir=str(output_dir),
        num_generations=4,
        per_device_train_batch_size=8,
        max_completion_length=32,
        bf16=False,
        report_to="none",
    )
    values.update(overrides)
    return GRPOConfig(**values)


def test_reward_columns_are_the_named_parameters_trl_does_not_supply():
    def needs_answer_and_unit(completions, answer, unit, prompts=None, trainer_state=None, **kwargs):
        return [0.0] * len(completions)

    def optional_column(completions, answer="", **kwargs):
        return [0.0] * len(completions)

    needs = reward_columns([needs_answer_and_unit, optional_column, correctness_reward, strict_format_reward])
    assert needs == {
        "needs_answer_and_unit": ["answer", "unit"],
        "optional_column": [],
        "correctness_reward": ["answer"],
        "strict_format_reward": [],
    }
    assert reward_columns(make_length_reward(50)) == {"length_reward": []}
    assert reward_columns(["some/reward-model"]) == {}


def test_missing_answer_column_names_the_reward_and_the_columns():
    with pytest.raises(PreflightError, match=r"'correctness_reward' takes \['answer'\].*only \['prompt'\]"):
        check_dataset(chat_rows(), [correctness_reward])
    check_dataset(chat_rows(answer="5"), [correctness_reward])


def test_dataset_shape_problems_name_row_and_column():
    with pytest.raises(PreflightError, match="No 'prompt' column"):
        check_dataset(Dataset.from_dict({"question": ["hi"]}))
    with pytest.raises(PreflightError, match="Row 1, column 'answer': empty value"):
        check_dataset(Dataset.from_dict({"prompt": [CHAT, CHAT], "answer": ["5", " "]}), [correctness_reward])
    with pytest.raises(PreflightError, match="Row 0, column 'prompt': the last message is from 'assistant'"):
        check_dataset(Dataset.from_dict({"prompt": [[*CHAT, {"role": "assistant", "content": "5"}]]}))
    with pytest.raises(PreflightError, match="Row 0, column 'prompt': the prompt is an empty string"):
        check_dataset(Dataset.from_dict({"prompt": [""]}))


def test_batch_arithmetic():
    check_batch(4, 8)
    check_batch(4, 2, steps_per_generation=2)  # 2 completions per step, 4 per generation batch: one group
    with pytest.raises(PreflightError, match=r"= 6 completions.*groups of num_generations=4.*=4 or 8"):
        check_batch(4, 6)
    with pytest.raises(PreflightError, match="at least 2 per prompt"):
        check_batch(1, 8)


def test_precision_unsupported_by_the_device():
    check_precision(False, False, CPU)
    check_precision(False, True, T4)
    check_precision(True, False, A100)
    with pytest.raises(PreflightError, match="fp16=True needs a CUDA GPU"):
        check_precision(False, True, CPU)
    with pytest.raises(PreflightError, match="Tesla T4 has no bfloat16.*bf16=False, fp16=True"):
        check_precision(True, False, T4)
    with pytest.raises(PreflightError, match="choose one"):
        check_precision(True, True, A100)


class _Tokenizer:
    """Just enough of a tokenizer: one token per word, a two-token chat wrapper per message."""

    def __init__(self, pad_token=None, eos_token="</s>", model_max_length=1_000_000_000_000):
        self.pad_token, self.eos_token, self.model_max_length = pad_token, eos_token, model_max_length

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        text = " ".join(f"<{m['role']}> {m['content']}" for m in messages)
        return text + (" <assistant>" if add_generation_prompt else "")

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": list(range(len(text.split())))}


def test_missing_pad_token_is_fine_with_an_eos_token_and_refused_without():
    check_pad_token(_Tokenizer(pad_token=None, eos_token="</s>"))  # GRPOTrainer pads with EOS
    with pytest.raises(PreflightError, match="neither a pad token nor an end-of-sequence token"):
        check_pad_token(_Tokenizer(pad_token=None, eos_token=None))


def test_length_budget_against_the_context():
    long_prompt = [{"role": "user", "content": "word " * 100}]
    rows = Dataset.from_dict({"prompt": [CHAT, long_prompt]})
    assert check_length_budget(rows, _Tokenizer(), max_completion_length=32, context_length=200) == 102
    with pytest.raises(PreflightError, match=r"Row 1: the prompt has 102 tokens.*context of 128.*more than 96"):
        check_length_budget(rows, _Tokenizer(), max_completion_length=32, context_length=128)
    assert check_length_budget(rows, _Tokenizer(), 32, context_length=None) == 102


def test_context_length_from_model_config_or_tokenizer():
    class Config:
        max_position_embeddings = 2048

    class Model:
        config = Config()

    assert context_length(Model(), _Tokenizer()) == 2048
    assert context_length(None, _Tokenizer(model_max_length=512)) == 512
    assert context_length(None, _Tokenizer()) is None  # "no limit" sentinel


def test_preflight_lists_every_problem_at_once(tmp_path):
    rows = Dataset.from_dict({"prompt": [CHAT] * 4})
    with pytest.raises(PreflightError) as caught:
        preflight(
            config(tmp_path, fp16=True, multi_objective_aggregation="gdpo"),
            rows,
            _Tokenizer(pad_token=None, eos_token=None),
            [correctness_reward],
            hardware=CPU,
        )
    message = str(caught.value)
    assert message.startswith("4 problem(s) before training:")
    assert "'correctness_reward' takes ['answer']" in message
    assert "fp16=True needs a CUDA GPU" in message
    assert "neither a pad token" in message
    assert "multi_objective_aggregation='gdpo' is not one TRL knows" in message  # TRL would fail at step 1


def test_preflight_on_the_course_model_and_data(course_model, tmp_path):
    from course_utils.data import arithmetic_problems, to_conversational

    model, tokenizer = course_model
    rows = to_conversational(arithmetic_problems(n_train=16, n_test=4)["train"], system_prompt="Be brief.")
    summary = preflight(
        config(tmp_path), rows, tokenizer, [strict_format_reward, correctness_reward], model=model, hardware=CPU
    )
    assert summary.startswith("preflight ok: 16 prompts")
    assert "reward columns ['answer']" in summary
    with pytest.raises(PreflightError, match="exceeds the model's context"):
        preflight(
            config(tmp_path, max_completion_length=context_length(model, tokenizer)),
            rows,
            tokenizer,
            [strict_format_reward],
            model=model,
            hardware=CPU,
        )


def test_tracking_is_optional_and_never_a_login_prompt(monkeypatch, tmp_path):
    from course_utils import preflight as pf

    check_tracking = pf.check_tracking
    for quiet in ("none", [], None, [None]):
        check_tracking(quiet)
    monkeypatch.setattr(pf.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(PreflightError, match='report_to="trackio" needs the trackio package: pip install trackio'):
        check_tracking(["trackio"])
    monkeypatch.setattr(pf.importlib.util, "find_spec", lambda name: object())  # pretend every tracker is installed
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc: not logged in to wandb
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    with pytest.raises(PreflightError, match="would stop training to ask for a login: run `wandb login`"):
        check_tracking("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    check_tracking("wandb")
    check_tracking(["trackio"])
    with pytest.raises(PreflightError, match='name the one you want, or "none"'):
        check_tracking("all")
