"""Learned rewards (notebook 12): the pair builder, the ensemble's arithmetic, and scores as GRPOTrainer sees them."""

import statistics

import pytest
import torch
from datasets import Dataset
from transformers import LlamaForSequenceClassification
from trl import GRPOConfig, GRPOTrainer

from course_utils.reward_models import (
    EnsembleReward,
    combine_scores,
    pairwise_accuracy,
    preference_pairs,
    reward_scores,
)

PROMPT = [{"role": "user", "content": "w1 w2"}]


def texts(pairs, side):
    return [row[side][0]["content"] for row in pairs]


def test_pairs_keep_every_gap_of_at_least_min_gap_with_the_higher_score_chosen():
    pairs = preference_pairs([PROMPT], [["a", "b", "c", "d"]], [[0.0, 1.0, 0.2, 0.9]], min_gap=0.5)
    # gaps: a-b 1.0, a-c 0.2 (dropped), a-d 0.9, b-c 0.8, b-d 0.1 (dropped), c-d 0.7
    assert list(zip(texts(pairs, "chosen"), texts(pairs, "rejected"), strict=True)) == [
        ("b", "a"),
        ("d", "a"),
        ("b", "c"),
        ("d", "c"),
    ]
    assert list(pairs["chosen_score"]) == [1.0, 0.9, 1.0, 0.9] and list(pairs["rejected_score"]) == [0.0, 0.0, 0.2, 0.2]
    assert pairs[0]["prompt"] == PROMPT and list(pairs["prompt_index"]) == [0, 0, 0, 0]


def test_pairs_skip_identical_texts_cap_per_prompt_and_keep_the_prompt_index():
    prompts = [PROMPT, [{"role": "user", "content": "w3"}]]
    pairs = preference_pairs(prompts, [["x", "x", "y"], ["p", "q", "r"]], [[0.0, 1.0, 1.0], [0.0, 0.5, 1.0]],
                             min_gap=0.5, max_pairs_per_prompt=2)  # fmt: skip
    # prompt 0: x/x are the same text (no pair despite the gap of 1.0); x(0.0)/y(1.0) is a pair; x(1.0)/y(1.0) a tie
    # prompt 1: p-q 0.5, p-r 1.0, q-r 0.5: three pairs, capped at two
    assert list(pairs["prompt_index"]) == [0, 1, 1]
    assert list(zip(texts(pairs, "chosen"), texts(pairs, "rejected"), strict=True)) == [
        ("y", "x"),
        ("q", "p"),
        ("r", "p"),
    ]


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"min_gap": 0.0}, "min_gap=0.0"),
        ({"min_gap": 5.0}, "lower min_gap"),
    ],
)
def test_pairs_refuse_a_gap_that_makes_no_pair(kwargs, says):
    with pytest.raises(ValueError, match=says):
        preference_pairs([PROMPT], [["a", "b"]], [[0.0, 1.0]], **kwargs)


def test_pairs_name_the_prompt_whose_scores_do_not_match_its_completions():
    with pytest.raises(ValueError, match="prompt 1: 2 completions but 1 scores"):
        preference_pairs([PROMPT, PROMPT], [["a", "b"], ["a", "b"]], [[0.0, 1.0], [0.0]], min_gap=0.5)
    with pytest.raises(ValueError, match="2 prompts, 1 completion lists"):
        preference_pairs([PROMPT, PROMPT], [["a", "b"]], [[0.0, 1.0]], min_gap=0.5)


def test_combine_scores_arithmetic():
    members = [[1.0, 2.0, 0.0], [3.0, 2.0, 4.0]]
    assert combine_scores(members, "mean") == [2.0, 2.0, 2.0]
    assert combine_scores(members, "min") == [1.0, 2.0, 0.0]
    # spreads (population std): 1, 0, 2 -> mean - std: 2-1, 2-0, 2-2; with k=0.5: 2-0.5, 2, 2-1
    assert combine_scores(members, "mean_minus_std") == [1.0, 2.0, 0.0]
    assert combine_scores(members, "mean_minus_std", k=0.5) == [1.5, 2.0, 1.0]


def test_combine_scores_refuses_unknown_rules_and_ragged_members():
    with pytest.raises(ValueError, match="combine='median'"):
        combine_scores([[1.0], [2.0]], "median")
    with pytest.raises(ValueError, match="same completions"):
        combine_scores([[1.0, 2.0], [2.0]])


def reward_model(tiny_config, seed):
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return LlamaForSequenceClassification(
            tiny_config.__class__(**{**tiny_config.to_dict(), "num_labels": 1})
        ).eval()


def test_scores_are_what_grpo_trainer_gives_a_reward_model(tiny_tokenizer, tiny_config, tiny_model, tmp_path):
    """One GRPO step with a reward model and a recorder: reward_scores gives the same numbers for the same texts."""
    rm = reward_model(tiny_config, seed=1)
    seen = []

    def recorder(prompts, completions, **kwargs):
        seen.append((prompts, completions))
        return [0.0] * len(completions)

    logged = []
    original = rm.forward

    def forward(*args, **kwargs):
        out = original(*args, **kwargs)
        logged.append(out.logits[:, 0].tolist())
        return out

    rm.forward = forward
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": "w1 w2"}]}] * 2)
    args = GRPOConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4, num_generations=2,
                      max_completion_length=4, learning_rate=0.0, logging_steps=1, save_strategy="no",
                      report_to="none", bf16=False, use_cpu=True, seed=0)  # fmt: skip
    GRPOTrainer(model=tiny_model, reward_funcs=[rm, recorder], args=args, train_dataset=data,
                processing_class=tiny_tokenizer, reward_processing_classes=[tiny_tokenizer, None]).train()  # fmt: skip
    (prompts, completions), = seen  # fmt: skip
    rm.forward = original
    assert reward_scores(rm, tiny_tokenizer, prompts, completions) == pytest.approx(logged[0], abs=1e-6)


def test_scores_score_each_distinct_text_once_and_keep_the_given_order(tiny_tokenizer, tiny_config):
    rm = reward_model(tiny_config, seed=1)
    rows = []
    original = rm.forward

    def forward(*args, **kwargs):
        rows.append(kwargs["input_ids"].shape[0])
        return original(*args, **kwargs)

    completions = ["w5 w6 w7", "w3", "w5 w6 w7", "w4 w4", "w3"]  # 5 texts, 3 distinct
    one_by_one = [reward_scores(rm, tiny_tokenizer, [PROMPT], [c])[0] for c in completions]
    rm.forward = forward
    together = reward_scores(rm, tiny_tokenizer, [PROMPT] * 5, completions, batch_size=2)
    assert rows == [2, 1]  # 3 distinct texts in batches of 2
    assert together == pytest.approx(one_by_one, abs=1e-6)
    assert together[0] == together[2] and together[1] == together[4]  # a duplicate gets the very same score


REFERENCE_TEXTS = ["w3", "w4 w4", "w5 w6 w7", "w8 w3 w9 w4"]


def standardised(scores, reference):
    mean, spread = statistics.fmean(reference), statistics.pstdev(reference)
    return [(s - mean) / spread for s in scores]


def test_an_ensemble_of_one_model_twice_is_that_model_and_disagreement_lowers_the_score(tiny_tokenizer, tiny_config):
    a, b = reward_model(tiny_config, seed=1), reward_model(tiny_config, seed=2)
    completions = [[{"role": "assistant", "content": "w3 w4"}], [{"role": "assistant", "content": "w5"}]]
    prompts = [PROMPT, PROMPT]
    reference = ([PROMPT] * len(REFERENCE_TEXTS), REFERENCE_TEXTS)

    def scaled(model):  # the model's scores, in its spreads on the reference from its mean there
        return standardised(reward_scores(model, tiny_tokenizer, prompts, completions),
                            reward_scores(model, tiny_tokenizer, *reference))  # fmt: skip

    alone = scaled(a)
    twice = EnsembleReward([a, a], tiny_tokenizer, reference=reference)
    assert twice(prompts=prompts, completions=completions) == pytest.approx(alone)  # no disagreement: spread 0
    both = EnsembleReward([a, b], tiny_tokenizer, combine="mean_minus_std", reference=reference)
    scores_b = scaled(b)
    expected = [
        (x + y) / 2 - abs(x - y) / 2 for x, y in zip(alone, scores_b, strict=True)
    ]  # two members: std = |x - y| / 2
    assert both(prompts=prompts, completions=completions) == pytest.approx(expected)
    assert both.member_scores(prompts, completions) == [pytest.approx(alone), pytest.approx(scores_b)]


def test_an_ensemble_ignores_a_members_offset_and_scale(tiny_tokenizer, tiny_config):
    # Bradley-Terry leaves each reward model's offset and scale free. Raw, a member shifted up by 5 never is the
    # minimum, and "mean_minus_std" of two members would be the lower one's scores: the ensemble a no-op.
    a, b = reward_model(tiny_config, seed=1), reward_model(tiny_config, seed=2)
    shifted = reward_model(tiny_config, seed=2)
    original = shifted.forward

    def forward(*args, **kwargs):  # b's scores times 3, plus 5
        out = original(*args, **kwargs)
        out.logits = out.logits * 3.0 + 5.0
        return out

    shifted.forward = forward
    reference = ([PROMPT] * len(REFERENCE_TEXTS), REFERENCE_TEXTS)
    completions = ["w3 w4", "w5", "w9 w9"]
    prompts = [PROMPT] * 3
    plain = EnsembleReward([a, b], tiny_tokenizer, reference=reference)(prompts=prompts, completions=completions)
    moved = EnsembleReward([a, shifted], tiny_tokenizer, reference=reference)(prompts=prompts, completions=completions)
    assert moved == pytest.approx(plain, abs=1e-3)  # float32: the +5 costs digits at the tiny model's small spread
    raw_a, raw_shifted = (reward_scores(m, tiny_tokenizer, prompts, completions) for m in (a, shifted))
    assert combine_scores([raw_a, raw_shifted], "mean_minus_std") == pytest.approx(raw_a)  # raw: member a alone
    assert plain != pytest.approx(standardised(raw_a, reward_scores(a, tiny_tokenizer, *reference)), abs=1e-3)


def test_an_ensemble_refuses_one_member_an_unknown_rule_or_a_flat_reference_when_built(tiny_tokenizer, tiny_config):
    a = reward_model(tiny_config, seed=1)
    reference = ([PROMPT] * len(REFERENCE_TEXTS), REFERENCE_TEXTS)
    with pytest.raises(ValueError, match="at least 2 reward models"):
        EnsembleReward([a], tiny_tokenizer, reference=reference)
    with pytest.raises(ValueError, match="combine='max'"):
        EnsembleReward([a, a], tiny_tokenizer, combine="max", reference=reference)
    with pytest.raises(ValueError, match="member 0 gives every reference completion the same score"):
        EnsembleReward([a, a], tiny_tokenizer, reference=([PROMPT] * 2, ["w3", "w3"]))
    with pytest.raises(ValueError, match="reference: give at least 2"):
        EnsembleReward([a, a], tiny_tokenizer, reference=([PROMPT], ["w3"]))


def test_pairwise_accuracy_is_one_where_chosen_scores_higher(tiny_tokenizer, tiny_config):
    rm = reward_model(tiny_config, seed=1)
    completions = [["w3", "w4 w4", "w5 w6 w7"]]
    scores = reward_scores(rm, tiny_tokenizer, [PROMPT] * 3, completions[0])
    pairs = preference_pairs([PROMPT], completions, [scores], min_gap=1e-9)  # labelled by the model itself
    assert pairwise_accuracy(rm, tiny_tokenizer, pairs) == [1.0] * len(pairs)
    flipped = preference_pairs([PROMPT], completions, [[-s for s in scores]], min_gap=1e-9)
    assert pairwise_accuracy(rm, tiny_tokenizer, flipped) == [0.0] * len(flipped)


def test_grpo_trainer_awaits_an_async_reward_and_logs_it(tiny_tokenizer, tiny_model, tmp_path):
    """Notebook 12's judge is an ``async def`` reward: GRPOTrainer awaits it and logs it like any other."""
    import asyncio

    calls = []

    async def judge_reward(prompts, completions, **kwargs):
        await asyncio.sleep(0)  # where a judge behind an API would wait on the network
        calls.append(len(completions))
        return [0.25] * len(completions)

    data = Dataset.from_list([{"prompt": [{"role": "user", "content": "w1 w2"}]}] * 2)
    args = GRPOConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4, num_generations=2,
                      max_completion_length=4, learning_rate=0.0, logging_steps=1, save_strategy="no",
                      report_to="none", bf16=False, use_cpu=True, seed=0)  # fmt: skip
    trainer = GRPOTrainer(model=tiny_model, reward_funcs=[judge_reward], args=args, train_dataset=data,
                          processing_class=tiny_tokenizer)  # fmt: skip
    trainer.train()
    assert calls == [4]  # one call for the batch's 4 completions
    assert trainer.state.log_history[0]["rewards/judge_reward/mean"] == 0.25
