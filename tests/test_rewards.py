import math
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_utils.rewards import (
    completion_text,
    correctness_reward,
    extract_answer,
    make_length_reward,
    make_topic_reward,
    mentions_topic,
    parse_number,
    soft_format_reward,
    strict_format_reward,
)


def chat(text):
    return [{"role": "assistant", "content": text}]


GOOD = "<reasoning>\n2 plus 3 is 5.\n</reasoning>\n<answer>\n5\n</answer>"
TEMPLATE_COPY = "<reasoning>\n...\n</reasoning>\n<answer>\n...\n</answer>"


@pytest.mark.parametrize(
    ("text", "value"),
    [("5", 5), ("1,234", 1234), ("$12", 12), ("12.0", 12), ("\\boxed{5}", 5), ("-3", -3), (" 7. ", 7),
     ("-$4", -4), ("0.25", 0.25)],
)  # fmt: skip
def test_parse_number_accepts_common_decorations(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize("text", ["", "1 2 3", "five", "12 apples", "1e3", "...", "1,23", "nan", "inf", None, "3/4"])
def test_parse_number_refuses_to_guess(text):
    assert parse_number(text) is None


def test_extract_answer_takes_the_last_block():
    assert extract_answer("<answer>1</answer> then <answer> 2 </answer>") == "2"
    assert extract_answer("no tags") is None


def test_strict_format():
    assert strict_format_reward([GOOD, chat(GOOD)]) == [1.0, 1.0]
    bad = [
        TEMPLATE_COPY,  # the hack seen on the CPU: template copied with its placeholders
        "<reasoning>\nok\n</reasoning>\n<answer>\nfive\n</answer>",  # answer is not a number
        "Sure! " + GOOD,  # text before the tags
        "<reasoning>x</reasoning>",  # no answer
        "<reasoning><answer>1</answer></reasoning><answer>1</answer>",  # nested tags
        "",
    ]
    assert strict_format_reward(bad) == [0.0] * len(bad)


def test_soft_format_gives_partial_credit_in_order():
    scores = soft_format_reward(["", "<reasoning>", "<reasoning>x</reasoning><answer>y</answer>", GOOD])
    assert scores == [0.0, 0.1, 0.8, 1.0]
    assert soft_format_reward([TEMPLATE_COPY]) == [0.8]  # the template alone never earns full credit
    # working written in front of the tags (seen in a GRPO run) loses the "nothing outside" part
    assert soft_format_reward(["4 + 7 = 11\n\n" + GOOD, GOOD + " Hope this helps!"]) == [0.8, 0.8]


def test_correctness():
    completions = [GOOD, chat(GOOD), "<answer>$1,234</answer>", "<answer>1 2 5</answer>", "5", GOOD]
    answers = ["5", "5", "1234", "5", "5", "6"]
    assert correctness_reward(completions, answer=answers) == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]


def test_correctness_names_the_missing_answer_column():
    with pytest.raises(ValueError, match="needs an 'answer' column"):
        correctness_reward([GOOD, GOOD], answer=["5"])


def test_length_reward():
    reward = make_length_reward(10)
    assert reward(["x" * 10, chat("x" * 4), "x" * 25]) == [0.0, -6.0, -15.0]
    assert reward.__name__ == "length_reward"  # TRL logs rewards under the function's name
    with pytest.raises(ValueError, match="target_chars"):
        make_length_reward(-1)


def test_length_reward_penalises_completions_cut_off_by_the_budget():
    reward = make_length_reward(10, max_completion_length=4, truncation_penalty=100.0)
    assert reward(["x" * 10, "x" * 10], completion_ids=[[1, 2], [1, 2, 3, 4]]) == [0.0, -100.0]
    with pytest.raises(ValueError, match="needs completion_ids"):
        reward(["x"])


def test_length_reward_can_score_every_cut_off_completion_alike():
    reward = make_length_reward(10, max_completion_length=4, truncated_reward=-300.0)
    ids = [[1, 2], [1, 2, 3, 4], [1, 2, 3, 4]]
    # finished: -|12-10| = -2; the two cut off score -300 whatever their lengths (30 and 90 characters)
    assert reward(["x" * 12, "x" * 30, "x" * 90], completion_ids=ids) == [-2.0, -300.0, -300.0]
    # a group cut off entirely has equal rewards: advantages 0, nothing to learn (without it: -120 and -180)
    assert len(set(reward(["x" * 30, "x" * 90], completion_ids=ids[1:]))) == 1
    assert pickle.loads(pickle.dumps(reward))(["x" * 30], completion_ids=ids[1:2]) == [-300.0]
    assert repr(reward).endswith("truncation_penalty=100.0, truncated_reward=-300.0)")
    with pytest.raises(ValueError, match="needs max_completion_length"):
        make_length_reward(10, truncated_reward=-300.0)
    with pytest.raises(ValueError, match="2 completions but 1 completion_ids"):
        reward(["x", "y"], completion_ids=[[1]])


def test_topic_reward_charges_the_generic_reply_and_adds_to_the_length_reward():
    topic = make_topic_reward(100.0)
    length = make_length_reward(50, max_completion_length=32, truncated_reward=-300.0)
    texts = ["Bees make honey in their hives, all summer long.", "I'm glad I could help!"]
    ids = [[1] * 12, [1] * 6]  # both finished
    # length: -|48-50| = -2 and -|22-50| = -28; topic: 0 and -100, so the sum ranks the on-topic answer first
    assert length(texts, completion_ids=ids) == [-2.0, -28.0]
    assert topic(texts, topic=["bees", "bees"]) == [0.0, -100.0]
    assert topic([[{"role": "assistant", "content": "A bee."}]], topic=["bees"]) == [0.0]  # conversational
    assert mentions_topic("Volcanoes erupt.", "volcanic islands") and not mentions_topic("I am ready.", "the moon")
    assert pickle.loads(pickle.dumps(topic))(texts[1:], topic=["the moon"]) == [-100.0]
    assert topic.__name__ == "topic_reward" and repr(topic) == "make_topic_reward(penalty=100.0)"
    with pytest.raises(ValueError, match="'topic' column"):
        topic(texts)
    with pytest.raises(ValueError, match="2 completions but 1 topics"):
        topic(texts, topic=["bees"])
    with pytest.raises(ValueError, match="penalty must be a finite number >= 0"):
        make_topic_reward(-1.0)


def test_length_reward_scores_off_topic_answers_as_cut_off_ones():
    """Notebook 11's reward: only a finished answer that names its topic is ranked by its length."""
    reward = make_length_reward(50, 32, truncated_reward=-300.0, off_topic_reward=-300.0)
    texts = ["Bees make honey in their hives, all summer long.", "I'm glad I could help!", "Bees " * 20]
    ids = [[1] * 12, [1] * 6, [1] * 32]  # finished, finished, cut off at the budget
    # on topic: -|48-50| = -2; off topic: -300, not -|22-50| = -28; cut off: -300 whatever its topic
    assert reward(texts, completion_ids=ids, topic=["bees"] * 3) == [-2.0, -300.0, -300.0]
    # a group of a generic reply and cut-off answers has equal rewards: nothing to learn from the reply
    assert len(set(reward(texts[1:], completion_ids=ids[1:], topic=["bees"] * 2))) == 1
    assert pickle.loads(pickle.dumps(reward))(texts[1:2], completion_ids=ids[1:2], topic=["the moon"]) == [-300.0]
    assert repr(reward).endswith("truncated_reward=-300.0, off_topic_reward=-300.0)")
    with pytest.raises(ValueError, match="'topic' column"):
        reward(texts, completion_ids=ids)
    with pytest.raises(ValueError, match="3 completions but 1 topics"):
        reward(texts, completion_ids=ids, topic=["bees"])
    with pytest.raises(ValueError, match="off_topic_reward must be a finite number"):
        make_length_reward(50, 32, off_topic_reward=float("nan"))


def test_length_reward_with_eos_counts_a_completion_that_ended_at_the_budget_as_finished():
    """TRL's rule (completions/clipped_ratio): cut off means the last token is not the end-of-sequence token."""
    eos = 2
    texts = ["x" * 40, "x" * 40]
    ids = [[1] * 31 + [eos], [1] * 32]  # both 32 tokens: the first ended with eos as its 32nd token
    with_eos = make_length_reward(50, 32, truncated_reward=-300.0, eos_token_id=eos)
    without = make_length_reward(50, 32, truncated_reward=-300.0)
    assert with_eos(texts, completion_ids=ids) == [-10.0, -300.0]  # -|40-50| = -10 for the finished one
    assert without(texts, completion_ids=ids) == [-300.0, -300.0]  # without eos_token_id: both counted cut off
    with pytest.raises(ValueError, match="eos_token_id=...\\) needs max_completion_length"):
        make_length_reward(50, eos_token_id=eos)


def test_length_reward_survives_pickling_and_keeps_the_name_trl_logs():
    """TRL's reward factories return picklable callables (its async rollout worker pickles rewards)."""
    from trl.trainer.utils import get_callable_name

    completions, ids = ["x" * 10, chat("x" * 4), "x" * 25], [[1, 2], [1], [1, 2, 3, 4]]
    for reward in (make_length_reward(10), make_length_reward(10, max_completion_length=4, truncation_penalty=7.0)):
        copy = pickle.loads(pickle.dumps(reward))
        assert copy(completions, completion_ids=ids) == reward(completions, completion_ids=ids)
        assert get_callable_name(copy) == get_callable_name(reward) == "length_reward"  # rewards/length_reward/mean
    # -|10-10|, -|4-10|, -|25-10| - 7 (4 ids reached the budget of 4)
    assert copy(completions, completion_ids=ids) == [0.0, -6.0, -22.0]
    assert repr(copy) == "make_length_reward(target_chars=10, max_completion_length=4, truncation_penalty=7.0)"


def test_completion_text_handles_odd_shapes():
    assert completion_text([]) == "" and completion_text([{"role": "assistant"}]) == ""
    assert completion_text([{"role": "assistant", "content": ["not", "a string"]}]) == "['not', 'a string']"


TAGS = st.sampled_from(["<reasoning>", "</reasoning>", "<answer>", "</answer>", "\\boxed{", "}", "$", ",", "."])
TEXT = st.lists(st.one_of(st.text(max_size=30), TAGS, st.integers().map(str)), max_size=30).map("".join)
FORMATS = st.one_of(TEXT, TEXT.map(chat))


@settings(max_examples=300, deadline=None)
@given(st.lists(FORMATS, min_size=1, max_size=6), st.lists(st.integers(-10_000, 10_000), min_size=6, max_size=6))
def test_every_reward_returns_one_finite_float_per_completion(completions, truths):
    answers = [str(t) for t in truths[: len(completions)]]
    for reward in (strict_format_reward, soft_format_reward, make_length_reward(50)):
        values = reward(completions)
        assert len(values) == len(completions)
        assert all(isinstance(v, float) and math.isfinite(v) for v in values)
    values = correctness_reward(completions, answer=answers)
    assert len(values) == len(completions) and set(values) <= {0.0, 1.0}
    assert all(0.0 <= v <= 1.0 for v in soft_format_reward(completions))


@settings(max_examples=200, deadline=None)
@given(st.integers(-(10**9), 10**9), st.text(alphabet="abc +-*=.\n", max_size=40))
def test_a_correct_formatted_answer_always_scores(n, reasoning):
    text = f"<reasoning>think {reasoning}</reasoning>\n<answer>{n:,}</answer>"
    assert correctness_reward([text], answer=[str(n)]) == [1.0]
    assert strict_format_reward([text]) == [1.0]


def test_huge_and_unicode_inputs():
    huge = "<answer>" + "9" * 5000 + "</answer>"
    assert correctness_reward([huge], answer=["9"]) == [0.0]
    assert strict_format_reward(["<reasoning>ü 名前 🙂</reasoning><answer>٣</answer>"]) == [0.0]
