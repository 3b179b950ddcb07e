import pytest
import torch

from course_utils.data import arithmetic_problems, to_conversational
from course_utils.evaluation import evaluate_answers
from course_utils.models import load_model
from course_utils.presets import get_preset
from course_utils.rewards import REASONING_SYSTEM_PROMPT
from course_utils.warm_start import supervised_warm_start


def test_warm_start_rejects_zero_steps(course_model):
    rows = arithmetic_problems("add1", n_train=8, n_test=2)["train"]
    with pytest.raises(ValueError, match="steps must be >= 1"):
        supervised_warm_start(*course_model, rows, preset=get_preset("cpu-ci", task="arithmetic"), steps=0)


def test_warm_start_teaches_the_format(tmp_path):
    model, tokenizer = load_model("embedded", verbose=False)  # a private copy: training mutates it
    data = arithmetic_problems("add1", n_train=36, n_test=16, seed=0)
    test = to_conversational(data["test"], system_prompt=REASONING_SYSTEM_PROMPT)
    before = next(model.parameters()).detach().clone()
    trained = supervised_warm_start(
        model, tokenizer, data["train"], preset=get_preset("cpu-ci", task="arithmetic"),
        system_prompt=REASONING_SYSTEM_PROMPT, output_dir=str(tmp_path),
    )  # fmt: skip
    assert trained is model
    assert not torch.equal(before, next(model.parameters()).detach())
    report, _ = evaluate_answers(model, tokenizer, test, max_new_tokens=48, progress=False)
    assert report["format"].mean >= 0.25, "the base model formats 0%; 4 warm-start steps must change that"
