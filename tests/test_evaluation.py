import copy
import math

import pytest
import torch
from transformers import LlamaForCausalLM

from course_utils.evaluation import (
    Estimate,
    generate,
    generate_sharing_prefix,
    length_report,
    mean_with_ci,
    proportion_ci,
)


def test_mean_with_ci():
    est = mean_with_ci([1, 2, 3, 4])
    assert est.mean == 2.5 and est.n == 4
    assert est.low < 2.5 < est.high
    assert math.isclose(est.high - est.mean, 1.96 * (5 / 3) ** 0.5 / 2)
    with pytest.raises(ValueError, match="no values"):
        mean_with_ci([])


def test_mean_with_ci_of_constant_values_and_of_one_value():
    for value in (0.1, 1 / 3, -7.25, 1e6):
        est = mean_with_ci([value] * 5)
        assert est.low <= est.mean <= est.high and est.high - est.low < 1e-9  # no spread: a zero-width interval
    single = mean_with_ci([7])  # one value: no spread to measure, so no interval (NaN), and it says so
    assert single.mean == 7 and math.isnan(single.low) and math.isnan(single.high)
    assert str(single) == "7.0 (no interval, n=1)"
    assert mean_with_ci([0.5]).percent() == "50% (no interval, n=1)"


def test_proportion_ci_holds_its_estimate_at_0_and_100_percent():
    """Unclamped, the Wilson bound missed the estimate by a rounding error in 77 of the 400 cases 0/n and n/n
    for n = 1..200 (6/6 gave high=0.9999999999999999 < 1), and matplotlib's yerr refused the negative bar."""
    for n in range(1, 201):
        zero, full = proportion_ci(0, n), proportion_ci(n, n)
        assert zero.mean == zero.low == 0.0 and zero.high > 0, (n, zero)
        assert full.mean == full.high == 1.0 and full.low < 1, (n, full)
        for k in range(n + 1):
            est = proportion_ci(k, n)
            assert 0 <= est.low <= est.mean <= est.high <= 1, (k, n, est)
            assert est.mean - est.low >= 0 and est.high - est.mean >= 0, (k, n, est)  # the bars matplotlib draws


def test_estimate_moves_rounding_errors_onto_the_mean_and_rejects_real_mistakes():
    est = Estimate(1.0, 0.8, 1 - 1e-16, 20)  # Wilson's upper bound at 100%, one rounding error short
    assert (est.low, est.mean, est.high) == (0.8, 1.0, 1.0)
    assert Estimate(0.0, 2.8e-17, 0.26, 11).low == 0.0  # the same at 0% (what 0/11 gave)
    with pytest.raises(ValueError, match=r"low <= mean <= high, got low=0.9, mean=0.5, high=0.1.*Estimate\(mean, low"):
        Estimate(0.5, 0.9, 0.1, 10)  # bounds swapped with the mean: a mistake, not rounding


def test_length_report():
    report = length_report(["x" * 50, "x" * 70, ""], target_chars=50)
    assert report["lengths"] == [50, 70, 0]
    assert report["length_error"].mean == pytest.approx(70 / 3)
    assert report["within_20pct"] == pytest.approx(1 / 3)


class ScriptedLlama(LlamaForCausalLM):
    """A tiny Llama whose next word is scripted: after wK comes wK+1, after w9 the end of sequence, after
    anything else (such as the chat template's ``assistant``) w0. Greedy output is then known exactly and
    depends only on the last real token of the prompt, so padding on the wrong side shows up."""

    def forward(self, input_ids=None, **kwargs):
        out = super().forward(input_ids=input_ids, **kwargs)
        last = input_ids[:, -out.logits.shape[1] :]
        out.logits = 10.0 * torch.nn.functional.one_hot(self.script[last], self.config.vocab_size).float()
        return out


@pytest.fixture
def scripted(tiny_config, tiny_tokenizer):
    model = ScriptedLlama(tiny_config)
    ids = [tiny_tokenizer.convert_tokens_to_ids(f"w{k}") for k in range(10)]
    script = torch.full((len(tiny_tokenizer),), ids[0])
    script[ids[:-1]] = torch.tensor(ids[1:])
    script[ids[-1]] = tiny_tokenizer.eos_token_id
    model.register_buffer("script", script, persistent=False)
    return model, tiny_tokenizer


# Each prompt's greedy completion under the script with max_new_tokens=4 (the end token is not shown):
SCRIPTED = [
    ("w7", "w8 w9", True),  # w8 w9 <end>: ends on its own within 3 tokens
    ("w6", "w7 w8 w9", True),  # w7 w8 w9 <end>: the end token is the 4th and last allowed token
    ("w1 w2", "w3 w4 w5 w6", False),  # cut at 4 tokens
    ([{"role": "user", "content": "w5"}], "w0 w1 w2 w3", False),  # the template ends with "assistant"
]


@pytest.mark.parametrize("batch_size", [1, 2, 4])
def test_greedy_generation_completes_each_prompt_whatever_the_batching(scripted, batch_size):
    prompts, expected, expected_finished = map(list, zip(*SCRIPTED, strict=True))
    completions, finished = generate(*scripted, prompts, max_new_tokens=4, batch_size=batch_size, progress=False)
    assert completions == expected  # left padding: each prompt continues from its own last word
    assert finished == expected_finished


def test_any_end_token_of_the_generation_config_counts_as_finished(scripted):
    model, tokenizer = scripted
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("w4")]
    completions, finished = generate(model, tokenizer, ["w1", "w7"], max_new_tokens=4, progress=False)  # fmt: skip
    assert completions == ["w2 w3 w4", "w8 w9"] and finished == [True, True]


def test_generate_restores_padding_side_and_train_mode_even_on_error(scripted, monkeypatch):
    model, tokenizer = scripted
    model.train()
    assert tokenizer.padding_side == "right"
    generate(model, tokenizer, ["w1", "w2 w3"], max_new_tokens=2, progress=False)
    assert model.training and tokenizer.padding_side == "right"

    def out_of_memory(**kwargs):
        assert not model.training and tokenizer.padding_side == "left"  # what generation ran with
        raise RuntimeError("out of memory")

    monkeypatch.setattr(model, "generate", out_of_memory)
    with pytest.raises(RuntimeError, match="out of memory"):
        generate(model, tokenizer, ["w1"], max_new_tokens=2, progress=False)
    assert model.training and tokenizer.padding_side == "right"


def test_sampling_is_reproducible_by_seed_and_leaves_the_global_generator_alone(tiny_model, tiny_tokenizer):
    prompts = ["w1", "w2 w3", [{"role": "user", "content": "w4"}]]
    kw = dict(max_new_tokens=12, do_sample=True, temperature=1.0, progress=False)
    torch.manual_seed(123)
    expected_next_draw = torch.rand(3)
    torch.manual_seed(123)
    first = generate(tiny_model, tiny_tokenizer, prompts, seed=1, **kw)
    assert torch.equal(torch.rand(3), expected_next_draw), "generate changed the caller's random stream"
    assert generate(tiny_model, tiny_tokenizer, prompts, seed=1, **kw) == first
    # 3 prompts x 12 tokens drawn from 17 words by a random model: two seeds agreeing would mean no sampling
    assert generate(tiny_model, tiny_tokenizer, prompts, seed=2, **kw) != first
    greedy = dict(max_new_tokens=12, progress=False)
    assert generate(tiny_model, tiny_tokenizer, prompts, seed=1, **greedy) == generate(
        tiny_model, tiny_tokenizer, prompts, seed=2, **greedy
    ), "greedy decoding must not depend on the seed"


def test_generate_rejects_bad_batch_size(scripted):
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        generate(*scripted, ["w1"], max_new_tokens=4, batch_size=0)


def test_length_report_flags_budget_filling_and_collapse():
    report = length_report(["same", "same", "other", "same"], target_chars=4, finished=[True, False, False, False])
    assert report["finished_share"] == 0.25
    assert report["distinct_share"] == 0.5
    assert "finished_share" not in length_report(["a"], 1)
    with pytest.raises(ValueError, match="finished has 1 entries for 2 completions"):
        length_report(["a", "b"], 1, finished=[True])


def test_distinct_share_counts_only_copies_given_to_another_topic():
    answers = ["Bees pollinate."] * 3 + ["Rain falls."] * 2 + ["Nice!"] * 3
    topics = ["bees"] * 3 + ["rain"] * 2 + ["tea", "salt", "chess"]
    # "Bees pollinate." x3 and "Rain falls." x2 stay within their topic: 0 copies; "Nice!" went to 3 topics: 2 copies
    assert length_report(answers, 10, topics=topics)["distinct_share"] == (8 - 2) / 8
    # without topics, every repeat is a copy: 8 answers, 3 different texts
    assert length_report(answers, 10)["distinct_share"] == 3 / 8
    # one reply for every prompt of 3 topics x 2 phrasings: 4 copies of 6 (the most frequent topic keeps its 2)
    assert length_report(["Hi."] * 6, 3, topics=["a", "a", "b", "b", "c", "c"])["distinct_share"] == (6 - 4) / 6
    with pytest.raises(ValueError, match="topics has 1 entries for 2 completions"):
        length_report(["a", "b"], 1, topics=["x"])


def test_proportion_ci_is_wilson_and_stays_in_range():
    from course_utils.evaluation import proportion_ci

    zero, full, half = proportion_ci(0, 20), proportion_ci(20, 20), proportion_ci(10, 20)
    assert zero.mean == 0 and zero.low == 0 and 0.1 < zero.high < 0.2  # Wilson: 0.161 for 0/20
    assert full.high == 1 and 0.8 < full.low < 0.9
    assert half.low == pytest.approx(0.2993, abs=1e-3) and half.high == pytest.approx(0.7007, abs=1e-3)
    assert half.percent() == "50% (95% CI 30%-70%, n=20)"
    with pytest.raises(ValueError, match="no trials"):
        proportion_ci(0, 0)
    with pytest.raises(ValueError, match="between 0 and n=3"):
        proportion_ci(4, 3)


def test_answer_report_counts_format_and_accuracy():
    from course_utils.evaluation import answer_report

    good = "<reasoning>3 plus 4</reasoning>\n<answer>7</answer>"
    wrong = "<reasoning>3 plus 4</reasoning>\n<answer>8</answer>"
    report = answer_report([good, wrong, "7", "<answer>7</answer>"], ["7", "7", "7", "7"])
    assert report["format"].mean == 0.5 and report["accuracy"].mean == 0.5
    assert report["format"].n == 4
    with pytest.raises(ValueError, match="2 completions but 1 answers"):
        answer_report([good, good], ["7"])


def test_comparison_table_has_one_row_per_measurement():
    from course_utils.evaluation import answer_report, comparison_table

    good = "<reasoning>3 plus 4</reasoning>\n<answer>7</answer>"
    table = comparison_table(
        {"base": answer_report(["7", "8"], ["7", "7"]), "trained": answer_report([good, good], ["7", "7"])}
    )
    assert list(table.index) == ["base", "trained"]
    assert list(table.columns) == ["format", "accuracy", "lenient_accuracy"]
    assert table.loc["trained", "accuracy"].startswith("100% (95% CI")
    assert table.loc["base", "format"].startswith("0% (95% CI 0%-")
    with pytest.raises(ValueError, match="same metrics"):
        comparison_table({"a": {"format": table_est()}, "b": {"accuracy": table_est()}})


def table_est():
    from course_utils.evaluation import proportion_ci

    return proportion_ci(1, 2)


def test_evaluate_answers_scores_what_it_generated(scripted):
    from datasets import Dataset

    from course_utils.evaluation import answer_report, evaluate_answers

    text_prompts = [(p, text) for p, text, _ in SCRIPTED if isinstance(p, str)]  # a column holds one type
    rows = Dataset.from_list([{"prompt": p, "answer": "4"} for p, _ in text_prompts])
    report, completions = evaluate_answers(*scripted, rows, max_new_tokens=4, batch_size=2, progress=False)
    assert completions == [text for _, text in text_prompts]
    assert report == answer_report(completions, ["4"] * len(text_prompts))
    with pytest.raises(ValueError, match=r"needs columns \['answer'\]"):
        evaluate_answers(*scripted, rows.remove_columns("answer"), max_new_tokens=2)


def test_lenient_accuracy_reads_the_last_number_tags_or_not():
    from course_utils.evaluation import answer_scores

    good = "<reasoning>\n4 plus 7 equals 11.\n</reasoning>\n<answer>\n11\n</answer>"
    replies = [good, "4 + 7 = 11", "4 + 7 = 12", "eleven", "1,100 apples"]
    scores = answer_scores(replies, ["11", "11", "11", "11", "1100"])
    assert scores["format"] == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert scores["accuracy"] == [1.0, 0.0, 0.0, 0.0, 0.0]  # strict: the number inside the tags
    assert scores["lenient_accuracy"] == [1.0, 1.0, 0.0, 0.0, 1.0]  # last number: 11, 11, 12, none, 1100


def test_paired_gain_needs_a_gain_not_a_tie():
    from course_utils.proof import paired_gain

    tie = paired_gain([1, 0, 1, 0] * 12, [1, 0, 1, 0] * 12)
    assert (tie.mean, tie.low, tie.high) == (0.0, 0.0, 0.0), "no prompt changed: the interval is the point 0"
    gain = paired_gain([0.0] * 48, [1.0] * 24 + [0.0] * 24)  # half the prompts went 0 -> 1: mean +0.5
    assert gain.mean == 0.5 and 0.3 < gain.low < 0.5 < gain.high < 0.7
    loss = paired_gain([1.0] * 48, [0.0] * 6 + [1.0] * 42)  # 6 of 48 went 1 -> 0: mean -0.125
    assert loss.mean == -0.125 and loss.high <= 0
    errors = paired_gain([40.0, 30.0, 20.0] * 10, [10.0, 10.0, 20.0] * 10, higher_is_better=False)
    assert errors.mean == (30 + 20 + 0) / 3 and errors.low > 0, "an error that fell is a positive gain"
    with pytest.raises(ValueError, match="one score per prompt"):
        paired_gain([1, 0], [1])


def draws_after(seed, action, device="cpu"):
    """The next random numbers on ``device`` after seeding it and running ``action``."""
    torch.manual_seed(seed)
    action()
    return torch.rand(4, device=device)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_generate_on_a_gpu_leaves_the_gpu_random_state_as_it_was(tiny_model, tiny_tokenizer):
    """torch.manual_seed reseeds CUDA too; restoring only the CPU state reset a GPU training run's stream."""
    model = copy.deepcopy(tiny_model).to("cuda")
    kw = dict(max_new_tokens=6, do_sample=True, progress=False)
    untouched = draws_after(123, lambda: None, device="cuda")
    after = draws_after(123, lambda: generate(model, tiny_tokenizer, ["w1", "w2 w3"], seed=5, **kw), "cuda")
    assert torch.equal(after, untouched)


# The course model itself: the same properties with its real tokenizer and chat template (slow: loads it).
PROMPTS = [[{"role": "user", "content": q}] for q in ("Name a colour.", "What is 2 + 2?", "Say hello.")]


@pytest.mark.slow
def test_course_model_greedy_generation_is_the_same_at_any_batch_size(course_model):
    first = generate(*course_model, PROMPTS, max_new_tokens=8, batch_size=2, progress=False).completions
    second = generate(*course_model, PROMPTS, max_new_tokens=8, batch_size=3, progress=False).completions
    assert len(first) == 3 and all(isinstance(c, str) and c for c in first)
    assert first == second


@pytest.mark.slow
def test_course_model_completions_end_on_its_end_token(course_model):
    prompts = [[{"role": "user", "content": "Reply with the single word: yes"}]] * 2
    cut, cut_finished = generate(*course_model, prompts, max_new_tokens=1, progress=False)
    full, full_finished = generate(*course_model, prompts, max_new_tokens=40, progress=False)
    assert cut_finished == [False, False]
    assert full_finished == [True, True], full
    assert all(len(c) >= len(k) for c, k in zip(full, cut, strict=True))


def test_every_length_topic_has_a_word_list_that_never_names_the_topic():
    from course_utils.data import LENGTH_TOPICS, TOPIC_WORDS
    from course_utils.evaluation import says_something_about

    assert set(TOPIC_WORDS) == set(LENGTH_TOPICS)
    for topic in LENGTH_TOPICS:
        assert len(TOPIC_WORDS[topic]) >= 8, topic
        # naming the topic, in any of its words, is not an answer about it: the reward of notebook 07 pays for that
        assert not says_something_about(f"{topic} {topic.title()} {topic.upper()}.", topic), topic


def test_says_something_about_reads_stems_and_short_words_whole():
    from course_utils.evaluation import says_something_about

    assert says_something_about("Pollination needs them.", "bees")  # stem "pollin" (6 letters) starts the word
    assert says_something_about("The seas are deep.", "the ocean")  # "sea" (3 letters): whole word or plural
    assert not says_something_about("Every season is nice.", "the ocean")  # "season" starts with "sea": no
    assert not says_something_about("I am ready with a short answer in one sentence.", "bees")  # notebook 07's hack
    with pytest.raises(KeyError, match="TOPIC_WORDS"):
        says_something_about("anything", "a topic nobody listed")


def test_sampled_answer_scores_average_each_rows_own_samples(monkeypatch):
    from datasets import Dataset

    from course_utils import evaluation

    good = "<reasoning>\n4 plus 7 equals 11.\n</reasoning>\n<answer>\n11\n</answer>"
    drawn = [good, "11", good, "4 + 7 = 12", "12", good]  # row 0's three samples, then row 1's

    def fake_generate(model, tokenizer, prompts, **kwargs):
        assert prompts == ["q0", "q0", "q0", "q1", "q1", "q1"]  # each row's samples side by side
        assert kwargs["do_sample"] and kwargs["temperature"] == 0.7 and kwargs["seed"] == 5  # seeded
        return evaluation.Generations(drawn, [True] * 6)

    monkeypatch.setattr(evaluation, "generate", fake_generate)
    rows = Dataset.from_list([{"prompt": "q0", "answer": "11"}, {"prompt": "q1", "answer": "11"}])
    scores = evaluation.sampled_answer_scores(None, None, rows, samples_per_prompt=3, temperature=0.7,
                                              max_new_tokens=8, seed=5)
    assert scores["format"] == [2 / 3, 1 / 3]  # row 0: good, "11", good; row 1: "4 + 7 = 12", "12", good
    assert scores["accuracy"] == [2 / 3, 1 / 3]  # only the tagged answers count
    assert scores["lenient_accuracy"] == [1.0, 1 / 3]  # row 0's "11" counts; row 1's 12s do not
    with pytest.raises(ValueError, match="samples_per_prompt must be >= 1"):
        evaluation.sampled_answer_scores(None, None, rows, samples_per_prompt=0, temperature=0.7, max_new_tokens=8)



def test_a_model_trained_under_autocast_is_measured_in_its_weights_precision(tiny_model, tiny_tokenizer):
    from accelerate import Accelerator

    prompts = ["a b", "c d e"]
    before = generate(tiny_model, tiny_tokenizer, prompts, max_new_tokens=6, progress=False)
    calls = []
    trained = copy.deepcopy(tiny_model)
    trained = Accelerator(cpu=True, mixed_precision="bf16").prepare_model(trained)  # as a bf16 trainer leaves it
    wrapped = trained.forward
    assert "_original_forward" in trained.__dict__  # accelerate's autocast wrapper, kept after training
    trained._original_forward = _recording(trained._original_forward, calls)
    after = generate(trained, tiny_tokenizer, prompts, max_new_tokens=6, progress=False)
    assert calls and all(dtype == torch.float32 for dtype in calls)  # every forward ran outside autocast
    assert after == before  # the same weights, the same precision: the same greedy answers
    assert trained.forward is wrapped  # and training would go on under autocast, as before


def _recording(forward, calls):
    def run(*args, **kwargs):
        calls.append(torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else torch.float32)
        return forward(*args, **kwargs)

    return run


def _left_padded(tokenizer, rows: list[list[str]]):
    ids = [tokenizer.convert_tokens_to_ids(row) for row in rows]
    width = max(map(len, ids))
    pad = tokenizer.pad_token_id
    input_ids = torch.tensor([[pad] * (width - len(r)) + r for r in ids])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in ids])
    return input_ids, mask


@pytest.mark.parametrize(
    "rows",
    [
        [["w1", "w2", "w3", "w4", "w5"], ["w1", "w2", "w3", "w6"], ["w1", "w2", "w3", "w7", "w8", "w9"]],  # 3 shared
        [["w1", "w2"], ["w1", "w2", "w3", "w4"]],  # the shorter row is all shared: it keeps one token to run
        [["w1", "w2"], ["w3", "w4", "w5"]],  # nothing shared: generate as is
        [["w1", "w2", "w3"]],  # one row
    ],
)  # fmt: skip
def test_generation_sharing_the_prefix_gives_generates_tokens(tiny_model, tiny_tokenizer, rows):
    input_ids, mask = _left_padded(tiny_tokenizer, rows)
    settings = {"max_new_tokens": 6, "do_sample": False, "pad_token_id": tiny_tokenizer.pad_token_id}
    model = tiny_model.eval()
    with torch.no_grad():
        expected = model.generate(input_ids=input_ids, attention_mask=mask, **settings)
    shared = generate_sharing_prefix(model, input_ids, mask, **settings)
    assert shared.tolist() == expected.tolist(), "the input as given, then the same new tokens"


def test_under_autocast_the_shared_prefix_is_not_split_off(tiny_model, tiny_tokenizer):
    """In bf16 the shared part's rounding depends on the batch's shape: records proved under autocast keep generate."""
    input_ids, mask = _left_padded(tiny_tokenizer, [["w1", "w2", "w3", "w4"], ["w1", "w2", "w3", "w5", "w6"]])
    passes = []
    tiny_model.eval().register_forward_pre_hook(lambda m, a, kw: passes.append(tuple(kw["input_ids"].shape)),
                                                with_kwargs=True)  # fmt: skip
    settings = {"max_new_tokens": 2, "do_sample": False, "pad_token_id": tiny_tokenizer.pad_token_id}
    generate_sharing_prefix(tiny_model, input_ids, mask, **settings)
    assert passes[0] == (1, 3), "float32: the three shared tokens run once, as one row"
    passes.clear()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        generate_sharing_prefix(tiny_model, input_ids, mask, **settings)
    assert passes[0] == (2, 5), "under autocast: generate as is, every row's whole prompt"


@pytest.mark.slow
def test_course_model_sharing_the_tool_prompt_gives_generates_tokens(course_model):
    """Notebook 10's 40 held-out questions share 137 tokens of about 150 (the tool description)."""
    from course_utils.tools import calculator, calculator_problems, use_tool_chat_template

    model, tokenizer = course_model
    tokenizer = copy.deepcopy(tokenizer)  # the shared one keeps its own template
    use_tool_chat_template(tokenizer)
    tokenizer.padding_side = "left"
    prompts = calculator_problems(n_train=20, n_test=12, seed=0)["test"]["prompt"]
    texts = [tokenizer.apply_chat_template(p, tools=[calculator], add_generation_prompt=True, tokenize=False)
             for p in prompts]  # fmt: skip
    batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    settings = {"max_new_tokens": 24, "do_sample": False, "pad_token_id": tokenizer.pad_token_id}
    with torch.no_grad():
        expected = model.generate(**batch, **settings)
    assert generate_sharing_prefix(model, **batch, **settings).tolist() == expected.tolist()
