import pytest
import torch

from course_utils.data import arithmetic_problems, to_conversational
from course_utils.evaluation import evaluate_answers
from course_utils.models import load_model
from course_utils.presets import get_preset
from course_utils.rewards import REASONING_SYSTEM_PROMPT
from course_utils.warm_start import supervised_warm_start

PRESET = get_preset("cpu-ci", task="arithmetic")


def test_warm_start_rejects_zero_steps(tiny_model, tiny_tokenizer):
    rows = arithmetic_problems("add1", n_train=8, n_test=2)["train"]
    before = [p.detach().clone() for p in tiny_model.parameters()]
    with pytest.raises(ValueError, match="steps must be >= 1"):
        supervised_warm_start(tiny_model, tiny_tokenizer, rows, preset=PRESET, steps=0)
    assert all(torch.equal(a, b) for a, b in zip(before, tiny_model.parameters(), strict=True))


def test_warm_start_trains_the_model_it_was_given_in_place(tiny_model, tiny_tokenizer, tmp_path):
    """The logic on a tiny Llama: SFTTrainer accepts the recipe, trains every layer, returns the same object."""
    rows = arithmetic_problems("add1", n_train=12, n_test=2, seed=0)["train"]
    before = {name: p.detach().clone() for name, p in tiny_model.named_parameters()}
    trained = supervised_warm_start(
        tiny_model, tiny_tokenizer, rows, preset=PRESET, n_examples=8, steps=2, output_dir=str(tmp_path)
    )
    assert trained is tiny_model
    unchanged = [name for name, p in tiny_model.named_parameters() if torch.equal(before[name], p.detach())]
    assert not unchanged, f"full fine-tuning left {unchanged} as they were"


@pytest.mark.slow
def test_warm_start_teaches_the_format(tmp_path):
    model, tokenizer = load_model("embedded", verbose=False)  # a private copy: training mutates it
    data = arithmetic_problems("add1", n_train=36, n_test=16, seed=0)
    test = to_conversational(data["test"], system_prompt=REASONING_SYSTEM_PROMPT)
    before = next(model.parameters()).detach().clone()
    trained = supervised_warm_start(
        model, tokenizer, data["train"], preset=PRESET, system_prompt=REASONING_SYSTEM_PROMPT, output_dir=str(tmp_path)
    )
    assert trained is model
    assert not torch.equal(before, next(model.parameters()).detach())
    report, _ = evaluate_answers(model, tokenizer, test, max_new_tokens=48, progress=False)
    assert report["format"].mean >= 0.25, "the base model formats 0%; 4 warm-start steps must change that"
