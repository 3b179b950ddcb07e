"""Rewards before training: preflight calls each reward once the way GRPOTrainer does, on dummy completions.

A reward that cannot work fails here in a second with its name and the fix, instead of inside TRL after
the model has loaded and generated; answers the course's parse_number cannot read get a warning.
"""

import asyncio
import functools
import re
import statistics
import warnings

import numpy as np
import pytest
import torch
from datasets import Dataset
from trl import GRPOConfig

from course_utils.hardware import Hardware
from course_utils.preflight import (
    PROBE_COMPLETIONS,
    PreflightError,
    PreflightWarning,
    check_answers_parse,
    check_reward_call,
    preflight,
    probe_batch,
)
from course_utils.rewards import (
    correctness_reward,
    extract_answer,
    make_length_reward,
    parse_number,
    soft_format_reward,
    strict_format_reward,
)

CPU = Hardware(kind="cpu", device="cpu", name="CPU")
CHAT = [{"role": "user", "content": "What is 2 + 3?"}]
N = 2 * len(PROBE_COMPLETIONS)  # the probe uses the first two rows, each with every probe completion: 8


def chat_rows(answers=("5", "7", "9")):
    return Dataset.from_dict({"prompt": [CHAT] * len(answers), "answer": list(answers)})


def plain_rows():
    return Dataset.from_dict({"prompt": ["What is 2 + 3?", "What is 4 + 3?"], "answer": ["5", "7"]})


# ---- rewards that cannot work: each an error that names the reward and the fix ------------------------------


def no_kwargs(completions, answer):
    return [0.0] * len(completions)


def only_completions(completions):
    return [0.0] * len(completions)


def positional_only(completions, /, **kwargs):
    return [0.0] * len(completions)


def one_float(completions, **kwargs):
    return 1.0


def one_int(completions, **kwargs):
    return 0


def numpy_scalar(completions, **kwargs):
    return np.float32(0.5)


def tensor_scalar(completions, **kwargs):
    return torch.tensor(0.5)


def forgot_return(completions, **kwargs):
    [0.0 for _ in completions]


def one_per_row(completions, prompts, **kwargs):
    return [1.0] * len({str(p) for p in prompts})


def strings(completions, **kwargs):
    return ["1.0" for _ in completions]


def nested(completions, **kwargs):
    return [[1.0] for _ in completions]


def a_dict(completions, **kwargs):
    return {"score": [1.0] * len(completions)}


def a_string(completions, **kwargs):
    return "1.0"


def infinite(completions, **kwargs):
    return [float("-inf")] + [0.0] * (len(completions) - 1)


def first_word_length(completions, **kwargs):
    return [len(c[-1]["content"].split()[0]) for c in completions]  # IndexError on an empty completion


def treats_chat_as_text(completions, **kwargs):
    return [1.0 if c.strip() else 0.0 for c in completions]  # completions are message lists here


def reads_missing_column(completions, **kwargs):
    return [1.0 if c[-1]["content"] == s else 0.0 for c, s in zip(completions, kwargs["solution"], strict=True)]


async def async_one_float(completions, **kwargs):
    await asyncio.sleep(0)
    return 1.0


class NoKwargsCallable:
    def __call__(self, completions, answer):
        return [0.0] * len(completions)


BROKEN = {
    "no **kwargs": (
        no_kwargs,
        r"'no_kwargs' has no \*\*kwargs, but GRPOTrainer passes it \['completion_ids', 'log_extra', 'log_metric', "
        r"'prompts', 'trainer_state'\] by name too.*add \*\*kwargs, as in def no_kwargs\(completions, answer, "
        r"\*\*kwargs\)",
    ),
    "only completions": (only_completions, r"'only_completions' has no \*\*kwargs.*'answer'"),
    "positional-only": (positional_only, r"takes \['completions'\] positionally only.*remove the '/'"),
    "one float": (one_float, r"'one_float' returned 1.0, a single value, for 8 completions.*one float per completion"),
    "one int": (one_int, "'one_int' returned 0, a single value"),
    "numpy scalar": (numpy_scalar, "'numpy_scalar' returned .*0.5.*a single value"),
    "0-d tensor": (tensor_scalar, r"'tensor_scalar' returned tensor\(0.5000\), a single value"),
    "forgot return": (forgot_return, "'forgot_return' returned None.*is a `return` missing"),
    "one per row": (one_per_row, r"'one_per_row' returned 1 reward\(s\) for 8 completions: return exactly one"),
    "strings": (strings, r"'strings' returned '1.0' \(str\) for completion 0: each reward must be a number"),
    "lists": (nested, r"'nested' returned \[1.0\] \(list\) for completion 0"),
    "dict": (a_dict, "'a_dict' returned a dict: return a list with one float per completion"),
    "string": (a_string, "'a_string' returned a str"),
    "infinite": (infinite, "'infinite' returned -inf for completion 0: one infinite reward makes every advantage"),
    "fails on an empty completion": (
        first_word_length,
        r"'first_word_length' raised IndexError: list index out of range \(at `return \[len\(c\[-1\]\[\"content\"\]"
        r"\.split\(\)\[0\]\).*on the completion \[\{'role': 'assistant', 'content': ''\}\].*return a number",
    ),
    "treats chat messages as text": (
        treats_chat_as_text,
        r"'treats_chat_as_text' raised AttributeError: 'list' object has no attribute 'strip'.*completion\[-1\]"
        r"\['content'\]",
    ),
    "reads a column the dataset lacks": (
        reads_missing_column,
        r"'reads_missing_column' raised KeyError: 'solution'.*TRL passes the dataset's columns \['answer'\]",
    ),
    "async, one float": (async_one_float, "'async_one_float' returned 1.0, a single value"),
    "callable object without **kwargs": (NoKwargsCallable(), r"'NoKwargsCallable' has no \*\*kwargs"),
    "partial without **kwargs": (
        functools.partial(no_kwargs, answer=["5"]),
        r"'no_kwargs' has no \*\*kwargs",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_reward_that_cannot_work_is_named_with_the_fix(case):
    reward, message = BROKEN[case]
    with pytest.raises(PreflightError, match=message) as caught:
        check_reward_call(reward, chat_rows())
    error = caught.value
    assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__), "no chained trace"


# ---- rewards that work pass, and are left as they were ------------------------------------------------------


def returns_none_where_it_does_not_apply(completions, **kwargs):
    return [None if not c[-1]["content"] else 1.0 for c in completions]


def numpy_array(completions, **kwargs):
    return np.zeros(len(completions))


def torch_tensor(completions, **kwargs):
    return torch.zeros(len(completions))


def booleans(completions, **kwargs):
    return [bool(c[-1]["content"]) for c in completions]


def uses_trainer_state_and_logging(completions, trainer_state, log_metric, log_extra, **kwargs):
    progress = trainer_state.global_step / trainer_state.max_steps  # TRL's state, max_steps from the config
    log_metric("progress", progress)
    log_extra("length", [len(c[-1]["content"]) for c in completions])
    return [progress] * len(completions)


async def async_list(completions, **kwargs):
    await asyncio.sleep(0)
    return [0.0] * len(completions)


class AdaptiveWeight:
    """Notebook 04's stateful reward wrapper: every call changes its weight and appends to its history."""

    def __init__(self, reward_func):
        self.reward_func, self.weight, self.history = reward_func, 1.0, []
        self.__name__ = f"adaptive_{reward_func.__name__}"

    def __call__(self, completions, **kwargs):
        rewards = self.reward_func(completions, **kwargs)
        self.history.append(statistics.fmean(rewards))
        self.weight = 0.5
        return [self.weight * r for r in rewards]


WORKING = {
    "strict format": strict_format_reward,
    "soft format": soft_format_reward,
    "correctness": correctness_reward,
    "length": make_length_reward(50),
    "length with truncation penalty": make_length_reward(50, max_completion_length=8),
    "None where it does not apply": returns_none_where_it_does_not_apply,
    "numpy array": numpy_array,
    "torch tensor": torch_tensor,
    "booleans": booleans,
    "trainer_state, log_metric, log_extra": uses_trainer_state_and_logging,
    "async": async_list,
    "partial": functools.partial(correctness_reward),
    "reward model id": "some-org/some-reward-model",
}


@pytest.mark.parametrize("case", list(WORKING))
def test_a_working_reward_passes(case):
    check_reward_call(WORKING[case], chat_rows(), max_steps=10)


def test_plain_prompts_get_plain_text_completions():
    def lower(completions, **kwargs):
        return [float(c.lower() == "positive") for c in completions]  # fails on chat messages

    check_reward_call(lower, plain_rows())
    batch = probe_batch(plain_rows())
    assert batch["completions"] == list(PROBE_COMPLETIONS) * 2 and batch["prompts"][0] == "What is 2 + 3?"
    with pytest.raises(PreflightError, match="'lower' raised AttributeError: 'list' object"):
        check_reward_call(lower, chat_rows())


def test_a_stateful_reward_is_called_on_a_copy():
    adaptive = AdaptiveWeight(strict_format_reward)
    check_reward_call(adaptive, chat_rows())
    assert adaptive.weight == 1.0 and adaptive.history == [], "the probe must not train the wrapper's state"


def test_the_probe_batch_is_shaped_like_trls():
    rows = chat_rows().add_column("unit", ["apples", "pears", "plums"])
    batch = probe_batch(rows, max_steps=16)
    assert len(batch["completions"]) == N
    assert batch["completions"][3] == [{"role": "assistant", "content": ""}]
    assert batch["answer"] == ["5"] * 4 + ["7"] * 4 and batch["unit"] == ["apples"] * 4 + ["pears"] * 4
    assert batch["trainer_state"].max_steps == 16 and batch["trainer_state"].global_step == 0
    assert [len(ids) for ids in batch["completion_ids"][:4]] == [len(t.split()) for t in PROBE_COMPLETIONS]


# ---- answers the course's parse_number never reads: a warning per reward that relies on it -----------------


def notebook_02_correctness(completions, answer, **kwargs):  # notebook 02 writes its own, with parse_number
    return [
        1.0 if parse_number(extract_answer(c[-1]["content"])) == parse_number(a) else 0.0
        for c, a in zip(completions, answer, strict=True)
    ]


def exact_text(completions, answer, **kwargs):  # compares text: "five" is a fine answer for it
    return [float(c[-1]["content"].strip() == a) for c, a in zip(completions, answer, strict=True)]


@pytest.mark.parametrize(
    ("answers", "rewards", "expected"),
    [
        (("5", "five", "1,8", "7 apples"), [correctness_reward],
         r"'correctness_reward': column 'answer' holds 3 value\(s\) that parse_number cannot read as one number "
         r"\(row 1 'five', row 2 '1,8', row 3 '7 apples'\), so this reward will score 0.0 forever on those rows"),
        (("5", "", "3/4", "1e3", "2 or 3", "V", "12.0", "seven"), [notebook_02_correctness],
         r"'notebook_02_correctness'.*holds 6 value\(s\).*row 1 '', row 2 '3/4', row 3 '1e3', row 4 '2 or 3', "
         r"row 5 'V' and 1 more"),
        (("5", "five"), [strict_format_reward, exact_text], None),  # neither compares parse_number(answer)
        (("5", "-3", "1,234", "12.0", "$12", "\\boxed{7}", "8."), [correctness_reward], None),  # all readable
    ],
)  # fmt: skip
def test_answers_parse_number_cannot_read_are_named_with_their_rows(answers, rewards, expected):
    found = check_answers_parse(chat_rows(answers), rewards)
    if expected is None:
        assert found == []
    else:
        assert len(found) == 1 and re.search(expected, found[0]), found


# ---- through preflight(): problems listed with the others, warnings shown, the summary says so -------------


def config(**overrides):
    return GRPOConfig(
        **{"output_dir": "unused", "num_generations": 4, "per_device_train_batch_size": 8, "max_completion_length": 32,
           "bf16": False, "report_to": "none", "max_steps": 10, **overrides}
    )  # fmt: skip


class _Tokenizer:
    pad_token, eos_token, model_max_length = "<pad>", "</s>", 10**30

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        return " ".join(m["content"] for m in messages)

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": list(range(len(text.split())))}


def test_preflight_lists_every_broken_reward_with_the_other_problems():
    with pytest.raises(PreflightError) as caught:
        preflight(
            config(fp16=True), chat_rows(), _Tokenizer(), [no_kwargs, one_float, correctness_reward], hardware=CPU
        )
    message = str(caught.value)
    assert message.startswith("3 problem(s) before training:")
    assert "fp16=True needs a CUDA GPU" in message
    assert "'no_kwargs' has no **kwargs" in message and "'one_float' returned 1.0, a single value" in message


def test_preflight_warns_about_unreadable_answers_and_says_so_in_its_summary():
    with pytest.warns(PreflightWarning, match=r"row 1 'five'.*will score 0.0 forever"):
        summary = preflight(config(), chat_rows(("5", "five", "6")), _Tokenizer(), [correctness_reward], hardware=CPU)
    assert summary.startswith("preflight ok: 3 prompts")
    assert summary.endswith(f"rewards called on {N} dummy completions; 1 warning(s) above")
    args = config()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # readable answers: no warning at all
        summary = preflight(args, chat_rows(), _Tokenizer(), [correctness_reward], hardware=CPU)
    assert summary.endswith(f"rewards called on {N} dummy completions")


def test_the_probe_leaves_the_random_streams_as_they_were():
    import random

    def noisy(completions, **kwargs):
        return [random.random() + np.random.rand() + torch.rand(1).item() for _ in completions]

    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    check_reward_call(noisy, chat_rows())
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected


# ---- the course's own rewards, as the notebooks define them, pass the probe --------------------------------


def notebook_definitions(stem, **given):
    """Run only the imports, function and class definitions and upper-case constants of a course notebook."""
    import ast
    from pathlib import Path

    import nbformat

    path = Path(__file__).resolve().parents[1] / "notebooks" / f"{stem}.ipynb"
    namespace = dict(given)
    for c in nbformat.read(path, as_version=4).cells:
        if c.cell_type != "code" or c.source.lstrip().startswith(("%", "!")):
            continue
        tree = ast.parse(c.source)
        keep = [
            node
            for node in tree.body
            if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            or (
                isinstance(node, ast.Assign)
                and all(isinstance(t, ast.Name) and t.id.isupper() and len(t.id) > 1 for t in node.targets)  # not P
            )
            or "parameters" in c.metadata.get("tags", [])
        ]
        exec(compile(ast.Module(body=keep, type_ignores=[]), f"<{stem}>", "exec"), namespace)
    return namespace


def test_notebook_01_and_05_length_rewards_pass():
    from types import SimpleNamespace

    from course_utils.data import length_prompts

    data = length_prompts(n_train=4, n_test=2, system_prompt="Be brief.")["train"]
    namespace = notebook_definitions("01_first_grpo_run", P=SimpleNamespace(max_completion_length=32))
    namespace["truncation_penalty"] = 100.0  # a lower-case constant of the reward's cell
    check_reward_call(namespace["length_reward"], data)


@pytest.mark.parametrize("name", ["strict_format_reward", "soft_format_reward", "correctness_reward"])
def test_notebook_02_rewards_pass(name):
    from course_utils.data import arithmetic_problems, to_conversational
    from course_utils.rewards import REASONING_SYSTEM_PROMPT

    data = to_conversational(arithmetic_problems("add1", 4, 2), system_prompt=REASONING_SYSTEM_PROMPT)["train"]
    namespace = notebook_definitions("02_format_and_correctness_rewards")
    check_reward_call(namespace[name], data)
    assert check_answers_parse(data, [namespace[name]]) == []


def test_notebook_04_adaptive_weight_passes_and_keeps_its_state():
    from course_utils.data import arithmetic_problems, to_conversational

    data = to_conversational(arithmetic_problems("add1", 4, 2), system_prompt="Use tags.")["train"]
    adaptive = notebook_definitions("04_multi_stage_training")["AdaptiveWeight"](strict_format_reward, floor=0.25)
    check_reward_call(adaptive, data)
    assert adaptive.weight == 1.0 and adaptive.success_rate is None  # preflight scored a copy


def test_notebook_08_label_reward_passes_with_every_column_of_a_row():
    from pathlib import Path

    from course_utils.data import load_rows

    rows = load_rows(Path(__file__).resolve().parents[1] / "data" / "reviews.csv").select(range(2))
    data = rows.map(lambda row: {"prompt": [{"role": "user", "content": row["review"]}]})
    namespace = notebook_definitions("08_your_own_data")
    check_reward_call(namespace["label_reward"], data)
    batch = probe_batch(data)
    assert set(batch) >= {"review", "label", "product", "line"}  # every column reaches the reward, as in TRL
