"""The exercise checks: the reference solutions in notebooks/solutions/ pass them, and the notebooks' unsolved
stubs and typical mistakes do not, each with a message that says what to change."""

import re
import statistics
from pathlib import Path

import pytest
import torch

from course_utils import exercises
from course_utils.rewards import completion_text, correctness_reward, extract_answer, make_length_reward

SOLUTIONS = Path(__file__).resolve().parents[1] / "notebooks" / "solutions"
MARK = "# checked by tests/test_exercises.py"


def solution_namespace(notebook: str, **given) -> dict:
    """Execute the checked code blocks of one solutions file, with ``given`` names from the notebook."""
    text = (SOLUTIONS / f"{notebook}.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.DOTALL) if b.startswith(MARK)]
    assert blocks, f"{notebook}.md has no code block marked {MARK!r}"
    namespace = dict(given)
    for block in blocks:
        exec(compile(block, f"{notebook}.md", "exec"), namespace)
    return namespace


# notebook 07's fix, the same rule packaged: minus the distance, -200 off topic, -300 cut off at the budget
_length_and_topic = make_length_reward(50, max_completion_length=32, truncated_reward=-300.0, off_topic_reward=-200.0)


HONEST = "Bees make honey and pollinate our flowers."
SHORT = [0] * 10


def test_result_reads_as_a_verdict():
    assert str(exercises.ExerciseResult("Ex 1", True, "fine.")) == "Ex 1: ✔ solved. fine."
    assert not exercises.ExerciseResult("Ex 1", False, "no.")


# --- the reference solutions pass -------------------------------------------------------------------------
def test_solution_topic_reward_passes():
    result = exercises.check_topic_reward(solution_namespace("01_first_grpo_run")["topic_reward"])
    assert result.passed, result


def test_solution_entropy_passes():
    result = exercises.check_entropy(solution_namespace("06_grpo_from_scratch")["entropy_from_logits"])
    assert result.passed, result


def test_solutions_of_notebook_07_pass():
    ns = solution_namespace("07_reward_hacking_and_debugging", length_and_topic=_length_and_topic)
    hacked = exercises.check_hack_is_caught(
        _length_and_topic, ns["no_instruction_talk"], ns["my_hack"], HONEST, topic=["bees"], completion_ids=[SHORT]
    )
    assert hacked.passed, hacked
    duplicates = exercises.check_duplicate_penalty(ns["duplicate_penalty"])
    assert duplicates.passed, duplicates


def test_solution_soft_label_reward_passes():
    result = exercises.check_soft_label_reward(solution_namespace("08_your_own_data")["soft_label_reward"])
    assert result.passed, result


# --- the notebooks' stubs and typical mistakes fail, saying why --------------------------------------------
def test_topic_reward_stub_and_mistakes():
    stub = exercises.check_topic_reward(lambda completions, topic, **kwargs: [0.0] * len(completions))
    assert not stub and "must score more" in stub.message
    no_kwargs = exercises.check_topic_reward(lambda completions, topic: [0.0] * len(completions))
    assert not no_kwargs and "keep **kwargs" in no_kwargs.message

    def first_topic_only(completions, topic, **kwargs):  # compares every completion with topic[0]
        return [0.0 if topic[0] in c[-1]["content"].lower() else -1.0 for c in completions]

    assert not exercises.check_topic_reward(first_topic_only)
    wrong_length = exercises.check_topic_reward(lambda completions, topic, **kwargs: [0.0])
    assert not wrong_length and "one number per completion" in wrong_length.message


ENTROPY_MISTAKES = [  # (the answer, what the check's message must say)
    (lambda logits: torch.zeros(logits.shape[:-1]), "off by up to"),  # the notebook's stub
    (lambda logits: (logits.softmax(-1) * logits.log_softmax(-1)).sum(-1), "the wrong sign"),
    (lambda logits: -(logits.softmax(-1) * logits.log_softmax(-1)).sum(), "shape"),  # summed over everything
    (lambda logits: -(logits.softmax(-1) * logits.log_softmax(-1) / torch.log(torch.tensor(2.0))).sum(-1), "bits"),
]


def test_hack_check_refuses_a_non_hack_and_a_fix_that_does_not_catch():
    stub = exercises.check_hack_is_caught(
        _length_and_topic, _length_and_topic, HONEST, HONEST, topic=["bees"], completion_ids=[SHORT]
    )
    assert not stub and "same text" in stub.message
    off_topic = exercises.check_hack_is_caught(
        _length_and_topic, _length_and_topic, "I am ready with a short answer in one sentence.", HONEST,
        topic=["bees"], completion_ids=[SHORT],
    )  # fmt: skip
    assert not off_topic and "not a hack yet" in off_topic.message
    uncaught = exercises.check_hack_is_caught(
        _length_and_topic, _length_and_topic, "I can tell you about bees in one short sentence.", HONEST,
        topic=["bees"], completion_ids=[SHORT],
    )  # fmt: skip
    assert not uncaught and "must pay the honest answer more" in uncaught.message


def test_duplicate_penalty_stub_and_a_hidden_second_reward():
    stub = exercises.check_duplicate_penalty(lambda completions, **kwargs: [0.0] * len(completions))
    assert not stub and "identical" in stub.message

    def length_in_disguise(completions, **kwargs):  # penalises duplicates but also pays length
        texts = [completion_text(c) for c in completions]
        return [-30.0 * (texts.count(t) > 1) + len(t) / 100 for t in texts]

    hidden = exercises.check_duplicate_penalty(length_in_disguise)
    assert not hidden and "hidden" in hidden.message


def test_soft_label_reward_stub_and_the_hedge():
    stub = exercises.check_soft_label_reward(lambda completions, label, **kwargs: [0.0] * len(completions))
    assert not stub and "expected 1.0" in stub.message

    def pays_any_mention(completions, label, **kwargs):
        out = []
        for c, lab in zip(completions, label, strict=True):
            words = re.findall(r"[a-z]+", completion_text(c).lower())
            out.append(1.0 if words == [lab] else 0.5 if lab in words else 0.0)
        return out

    hedge = exercises.check_soft_label_reward(pays_any_mention)
    assert not hedge and "hedge" in hedge.message


def test_a_crashing_answer_is_reported_not_raised():
    def broken(completions, **kwargs):
        raise KeyError("content")

    result = exercises.check_duplicate_penalty(broken)
    assert not result and "raised KeyError" in result.message


def test_solution_sequence_ratio_passes():
    result = exercises.check_sequence_ratio(solution_namespace("11_grpo_family", torch=torch)["sequence_ratio"])
    assert result.passed, result.message


def _sum_of_log_ratios(logps, old_logps, mask):
    return torch.exp(((logps - old_logps) * mask).sum(-1, keepdim=True))


def _mean_over_padding(logps, old_logps, mask):
    return torch.exp((logps - old_logps).mean(-1, keepdim=True))


def _arithmetic_mean(logps, old_logps, mask):
    return ((logps - old_logps).exp() * mask).sum(-1, keepdim=True) / mask.sum(-1, keepdim=True)


SEQUENCE_RATIO_MISTAKES = [  # (the answer, what the check's message must say)
    (lambda logps, old, mask: torch.ones(logps.size(0), 1, dtype=logps.dtype), "expected"),  # the notebook's stub
    (_sum_of_log_ratios, "1/|o_i|"),  # exp(0.6), exp(0.4): the whole completion's likelihood ratio
    (_mean_over_padding, "mask"),  # exp(10.6 / 4): the padding's moved log-probs leak in
    (_arithmetic_mean, "geometric"),  # (e^0.4 + e^0.2) / 2 = 1.357 instead of e^0.3 = 1.350
    (lambda logps, old, mask: torch.exp(((logps - old) * mask).sum(-1) / mask.sum(-1)).tolist(), "shape"),
    (lambda logps, old, mask: 1 / 0, "ZeroDivisionError"),
]


def test_solution_pessimistic_passes():
    result = exercises.check_pessimistic(solution_namespace("12_learned_rewards")["pessimistic"])
    assert result.passed, result.message


PESSIMISTIC_MISTAKES = [  # (the answer, what the check's message must say)
    (lambda m, k=1.0: [statistics.fmean(s) for s in zip(*m, strict=True)], "plain mean"),  # the notebook's stub
    (lambda m, k=1.0: [statistics.fmean(s) - k * statistics.stdev(s) for s in zip(*m, strict=True)], "population"),
    (lambda m, k=1.0: [statistics.fmean(s) - statistics.pstdev(s) for s in zip(*m, strict=True)], "by k"),
    (lambda m, k=1.0: [min(s) for s in zip(*m, strict=True)], "expected"),  # the minimum: right only for 2 members
    (lambda m, k=1.0: [0.0], "one score per completion"),
    (lambda m, k=1.0: 1 / 0, "ZeroDivisionError"),
]


def _average(numbers: list[float]) -> str:
    """The mean of the numbers.

    Args:
        numbers: The numbers to average, for example [2, 4, 9].
    """
    if not numbers:
        raise ValueError("numbers is empty: pass at least one number")
    return str(sum(numbers) / len(numbers))


def _average_no_docstring(numbers: list[float]) -> str:
    return str(sum(numbers) / len(numbers))


def _average_of_text(numbers: str) -> str:
    """The mean.

    Args:
        numbers: Comma-separated numbers.
    """
    return "0"


def _average_silent_on_empty(numbers: list[float]) -> str:
    """The mean.

    Args:
        numbers: The numbers.
    """
    return str(sum(numbers) / max(len(numbers), 1))  # [] gives "0.0": a silent wrong answer


def _average_off_by_one(numbers: list[float]) -> str:
    """The mean.

    Args:
        numbers: The numbers.
    """
    return str(sum(numbers) / (len(numbers) + 1))


def test_average_tool_solution_passes():
    result = exercises.check_average_tool(_average)  # "5.0" counts: the model reads the number either way
    assert result.passed, result.message
    result = exercises.check_average_tool(solution_namespace("10_tools_and_agents")["average"])
    assert result.passed, result.message


AVERAGE_TOOL_MISTAKES = [  # (the answer, what the check's message must say)
    (_average_no_docstring, "schema"),  # TRL needs a docstring with Args: to describe the tool
    (_average_of_text, "array"),
    (_average_off_by_one, "expected the text of 5"),  # (2 + 4 + 9) / 4 = 3.75, not 5
    (_average_silent_on_empty, "empty"),
]


def test_trl_group_sizes_are_the_divisors_from_two():
    assert exercises.trl_group_sizes(6) == [2, 3, 6]  # 6 completions: groups of 2, 3 or 6
    assert exercises.trl_group_sizes(5) == [5]  # a prime batch: one group of all 5 (1 is refused)
    assert exercises.trl_group_sizes(4, 4) == [2, 4, 8, 16]  # 4 x 4 = 16: a group may exceed the micro-batch


def test_solution_group_sizes_passes():
    result = exercises.check_group_sizes(solution_namespace("03_hyperparameters_and_metrics")["group_sizes"])
    assert result.passed, result.message


GROUP_SIZES_MISTAKES = [  # (the answer, what the check's message must say)
    (lambda b, a=1: [b], "every divisor"),  # the notebook's stub: [8] against [2, 4, 8]
    (lambda b, a=1: [g for g in range(1, b * a + 1) if b * a % g == 0], "num_generations >= 2"),  # 1 included
    (lambda b, a=1: [g for g in range(2, b + 1) if b % g == 0], "gradient_accumulation_steps"),  # 4 x 4: [2, 4]
    (lambda b, a=1: [g for g in range(2, b * a + 1) if b * a % g == 0][::-1], "increasing order"),
    (lambda b, a=1: "2, 4, 8", "whole numbers"),
    (lambda b, a=1: 1 / 0, "ZeroDivisionError"),
]


# --- notebook 04: a scheduled reward weight -----------------------------------------------------------------
class _Scheduled:
    """ScheduledWeight with its mistakes switchable: counting before scoring, no clamp, no name."""

    def __init__(self, reward_func, start=1.0, end=0.25, steps=10, count_first=False, clamp=True, name=True):
        self.reward_func, self.start, self.end, self.steps = reward_func, start, end, steps
        self.count_first, self.clamp, self.batches = count_first, clamp, 0
        if name:
            self.__name__ = f"scheduled_{reward_func.__name__}"

    def __call__(self, completions, **kwargs):
        self.batches += self.count_first
        i = min(self.batches, self.steps) if self.clamp else self.batches
        self.batches += not self.count_first
        weight = self.start + (self.end - self.start) * i / self.steps
        return [weight * r for r in self.reward_func(completions, **kwargs)]


def test_solution_scheduled_weight_passes():
    result = exercises.check_scheduled_weight(solution_namespace("04_multi_stage_training")["ScheduledWeight"])
    assert result.passed, result.message  # weights 1.0, 0.75, 0.5, 0.25, 0.25 (start 1, end 0.25, 3 steps)


def _unweighted(reward_func, start=1.0, end=0.25, steps=10):  # the notebook's stub: the reward, never scaled
    def scaled(completions, **kwargs):
        return reward_func(completions, **kwargs)

    scaled.__name__ = f"scheduled_{reward_func.__name__}"
    return scaled


SCHEDULED_WEIGHT_MISTAKES = [  # (the answer, what the check's message must say)
    (_unweighted, "count the calls"),  # weights 1, 1, 1, 1, 1
    (lambda f, **kw: _Scheduled(f, **kw, count_first=True), "first batch must use the start weight"),
    (lambda f, **kw: _Scheduled(f, **kw, clamp=False), "clamp it"),  # 1.0, 0.75, 0.5, 0.25, 0.0
    (lambda f, **kw: _Scheduled(f, **kw, name=False), "__name__"),
    (lambda f, **kw: lambda completions: f(completions), "__name__"),  # no name, and no **kwargs
    (lambda f, start, end, steps: 1 / 0, "ZeroDivisionError"),
]


def test_scheduled_weight_must_pass_the_columns_on():
    def no_kwargs(reward_func, start=1.0, end=0.25, steps=10):
        def scaled(completions, **kwargs):
            return reward_func(completions)  # drops answer=...

        scaled.__name__ = f"scheduled_{reward_func.__name__}"
        return scaled

    result = exercises.check_scheduled_weight(no_kwargs)
    assert not result.passed and "**kwargs" in result.message


# --- notebook 05: LoRA's parameter count --------------------------------------------------------------------
def test_peft_counts_on_the_tiny_llama():
    # q_proj 32 -> 32 and v_proj 32 -> 16 in 2 layers, r = 4: 2 x (4 x (32 + 32) + 4 x (32 + 16)) = 896
    assert exercises.peft_lora_parameters(4, ["q_proj", "v_proj"]) == 896


def test_solution_lora_parameter_count_passes():
    result = exercises.check_lora_parameters(solution_namespace("05_lora_merge_and_inference")["lora_parameter_count"])
    assert result.passed, result.message


def _lora_count(side="both", head=False, weights=False):
    def count(model, r, target_modules):
        total = 0
        for name, module in model.named_modules():
            leaf = name.split(".")[-1]
            if not isinstance(module, torch.nn.Linear):
                continue
            if not (head or leaf != "lm_head") if target_modules == "all-linear" else leaf not in target_modules:
                continue
            sizes = {"both": module.in_features + module.out_features, "in": module.in_features}[side]
            total += module.weight.numel() if weights else r * sizes
        return total

    return count


LORA_PARAMETER_COUNT_MISTAKES = [  # (the answer, what the check's message must say)
    (lambda model, r, target_modules: 0, "add r * (in_features + out_features)"),  # the notebook's stub
    (_lora_count(side="in"), "two matrices"),
    (_lora_count(head=True), "except the output layer"),
    (_lora_count(weights=True), "does not train the layer's own weight"),
    (lambda model, r, target_modules: 1 / 0, "ZeroDivisionError"),
]


# --- notebook 09: the memory-bandwidth bound of decoding ----------------------------------------------------
def test_solution_decode_bound_passes():
    result = exercises.check_decode_bound(solution_namespace("09_scaling_out")["decode_bound"])
    assert result.passed, result.message
    assert "185 tokens/s" in result.message  # 100e9 B/s / (135e6 x 4 B) = 185.2 decoding steps a second


DECODE_BOUND_MISTAKES = [  # (the answer, what the check's message must say)
    (lambda p, b, bw, n: 0.0, "tokens per second = batch_size"),  # the notebook's stub
    (lambda p, b, bw, n: bw * 1e9 / (p * b), "multiply by batch_size"),
    (lambda p, b, bw, n: n * bw * 1024**3 / (p * b), "not 1024**3"),
    (lambda p, b, bw, n: n * bw * 1e9 / (p * b * 8), "no factor of 8"),
    (lambda p, b, bw, n: 1 / 0, "ZeroDivisionError"),
]


# --- notebook 02: correctness with a single answer ----------------------------------------------------------
def test_solution_single_answer_reward_passes():
    result = exercises.check_single_answer_reward(
        solution_namespace("02_format_and_correctness_rewards")["single_answer_reward"]
    )
    assert result.passed, result.message


def _string_match(completions, answer, **kwargs):  # "18.0" is not "18" as text
    texts = [c[-1]["content"] for c in completions]
    pairs = zip(texts, answer, strict=True)
    return [1.0 if t.count("<answer>") == 1 and extract_answer(t) == a else 0.0 for t, a in pairs]


def _first_answer_for_all(completions, answer, **kwargs):  # one answer tag, but always compared with answer[0]
    scores = correctness_reward(completions, [answer[0]] * len(completions))
    return [s if c[-1]["content"].count("<answer>") == 1 else 0.0 for s, c in zip(scores, completions, strict=True)]


SINGLE_ANSWER_REWARD_MISTAKES = [  # (the answer, what the check's message must say)
    (lambda completions, answer, **kwargs: [0.0] * len(completions), "right, one answer"),  # the stub
    (correctness_reward, "count the <answer> blocks first"),  # pays the last of three answers
    (_string_match, "compare numbers, not strings"),
    (_first_answer_for_all, "its own answer"),
    (lambda completions, answer: [0.0] * len(completions), "keep **kwargs"),
    (lambda completions, answer, **kwargs: [1.0], "one number per completion"),
]


# --- every typical mistake above fails its check, and the message names what to change ------------------------
MISTAKES = [
    *[(exercises.check_entropy, *m) for m in ENTROPY_MISTAKES],
    *[(exercises.check_sequence_ratio, *m) for m in SEQUENCE_RATIO_MISTAKES],
    *[(exercises.check_pessimistic, *m) for m in PESSIMISTIC_MISTAKES],
    *[(exercises.check_average_tool, *m) for m in AVERAGE_TOOL_MISTAKES],
    *[(exercises.check_group_sizes, *m) for m in GROUP_SIZES_MISTAKES],
    *[(exercises.check_scheduled_weight, *m) for m in SCHEDULED_WEIGHT_MISTAKES],
    *[(exercises.check_lora_parameters, *m) for m in LORA_PARAMETER_COUNT_MISTAKES],
    *[(exercises.check_decode_bound, *m) for m in DECODE_BOUND_MISTAKES],
    *[(exercises.check_single_answer_reward, *m) for m in SINGLE_ANSWER_REWARD_MISTAKES],
]


@pytest.mark.parametrize(
    ("check", "answer", "says"), [pytest.param(*m, id=f"{m[0].__name__}: {m[2]}") for m in MISTAKES]
)
def test_a_typical_mistake_fails_and_the_message_says_what_to_change(check, answer, says):
    result = check(answer)
    assert not result.passed
    assert says in result.message


def test_an_answer_that_asks_peft_itself_passes_case_after_case():
    # get_peft_model wraps the model it is given in place: each case must get a fresh model
    def with_peft(model, r, target_modules):
        from peft import LoraConfig, get_peft_model

        peft_model = get_peft_model(model, LoraConfig(r=r, target_modules=target_modules))
        return sum(p.numel() for p in peft_model.parameters() if p.requires_grad)

    result = exercises.check_lora_parameters(with_peft)
    assert result.passed, result.message
