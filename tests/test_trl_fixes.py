"""course_utils.trl_fixes: each fix applies to the installed TRL (or transformers), does what it says, and changes
no result."""

import inspect

import pytest
import torch

import course_utils.models  # noqa: F401  (importing it applies the fixes, as in every notebook)
from course_utils import trl_fixes

ALL_FIXES = [trl_fixes.COMPACT_FIX, trl_fixes.SAMPLING_FIX, trl_fixes.STOP_STRINGS_FIX, trl_fixes.STOP_TABLE_FIX]


def test_the_installed_trl_gets_the_compact_lm_head_fix():
    """If this fails after a TRL upgrade, read trl/trainer/utils.py's add_fused_lm_head: if the new TRL scores only
    the labelled rows on a CPU by itself, delete the fix; if it still picks the path in another way, update it."""
    from trl.trainer import utils as trl_utils

    assert trl_fixes.applied_trl_fixes() == ALL_FIXES
    assert trl_utils._use_triton(torch.device("cpu")), "a CPU takes TRL's compact path"
    original = trl_utils._use_triton.original
    for device in ("cuda", "xpu", "meta"):  # elsewhere TRL decides, as before
        assert trl_utils._use_triton(torch.device(device)) == original(torch.device(device))
    assert trl_fixes.apply_trl_fixes() == ALL_FIXES  # again: no change
    assert trl_utils._use_triton.original is original, "applied twice, it would wrap itself"


def test_a_changed_trl_is_left_alone(monkeypatch):
    from trl.trainer import utils as trl_utils

    original = trl_utils._use_triton.original
    monkeypatch.setattr(trl_utils, "_use_triton", original)
    monkeypatch.setattr(trl_fixes, "_applied", [])
    monkeypatch.setattr(trl_fixes, "COMPACT_LINE", "compact = some_other_rule(hidden_states.device)")
    assert trl_fixes.apply_trl_fixes() == ALL_FIXES[1:]
    assert trl_utils._use_triton is original


def _score(model, input_ids, labels, projected_rows):
    """TRL's fused head on one batch: the loss, the per-token log-probs and every gradient, recording the rows
    the head projected."""
    from trl.trainer import utils as trl_utils

    model.zero_grad(set_to_none=True)
    apply = trl_utils._ChunkedLogProbFunction.apply

    def counting_apply(hidden, *args):
        projected_rows.append(hidden.shape[0])
        return apply(hidden, *args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(trl_utils._ChunkedLogProbFunction, "apply", counting_apply)
        out = model(input_ids=input_ids, labels=labels, fused_lm_head=True)
    out.loss.backward()
    return out.loss.detach(), out.log_probs.detach(), [p.grad.clone() for p in model.parameters()]


def test_the_head_projects_only_labelled_rows_and_the_results_agree(tiny_model, monkeypatch):
    from trl.trainer import utils as trl_utils

    trl_utils.add_fused_lm_head(tiny_model)
    vocab = tiny_model.config.vocab_size
    input_ids = torch.randint(0, vocab, (2, 10), generator=torch.Generator().manual_seed(0))
    labels = input_ids.clone()
    labels[:, :6] = -100  # a 6-token prompt: only the 4 completion tokens are scored, as GRPOTrainer asks
    labels[1, 8:] = -100  # the second completion ended early: padding
    fixed_rows, trl_rows = [], []
    fixed = _score(tiny_model, input_ids, labels, fixed_rows)
    monkeypatch.setattr(trl_utils, "_use_triton", trl_utils._use_triton.original)  # TRL as installed
    as_installed = _score(tiny_model, input_ids, labels, trl_rows)

    assert trl_rows == [2 * 9]  # every position but the last, whose label falls off the end
    assert fixed_rows == [4 + 2]  # only those whose shifted label is a token: 4 in row 0, 2 in row 1
    assert torch.equal(fixed[0], as_installed[0]), "the same loss"
    assert torch.allclose(fixed[1], as_installed[1], atol=1e-6), "the same per-token log-probs"
    for ours, theirs in zip(fixed[2], as_installed[2], strict=True):
        assert torch.allclose(ours, theirs, rtol=1e-5, atol=1e-7), "the same gradients, to float32 rounding"
    assert max(g.abs().max().item() for g in fixed[2]) > 1e-3, "a comparison of zero gradients proves nothing"


def test_the_environment_variable_turns_the_fixes_off_or_names_what_to_set(monkeypatch):
    from trl.trainer import utils as trl_utils

    original = trl_utils._use_triton.original
    monkeypatch.setattr(trl_utils, "_use_triton", original)
    monkeypatch.setattr(trl_fixes, "_applied", [])
    monkeypatch.setenv(trl_fixes.FIXES_ENV, "0")
    assert trl_fixes.apply_trl_fixes() == [] and trl_utils._use_triton is original
    monkeypatch.setenv(trl_fixes.FIXES_ENV, "off")
    with pytest.raises(ValueError, match="GRPO_COURSE_TRL_FIXES='off' is not understood: set it to 1 .* or 0"):
        trl_fixes.apply_trl_fixes()
    monkeypatch.setenv(trl_fixes.FIXES_ENV, "1")
    assert trl_fixes.apply_trl_fixes() == ALL_FIXES
    assert trl_utils._use_triton.original is original


def test_trl_samples_through_one_method_outside_any_autocast_region():
    """If this fails after a TRL upgrade, read GRPOTrainer._generate: the sampling fix wraps the one call that
    samples, and it helps only if the trainer does not already sample inside an autocast region of its own."""
    from trl import GRPOTrainer

    assert GRPOTrainer._generate_single_turn.course_fix
    assert "self._generate_single_turn(" in inspect.getsource(GRPOTrainer._generate)
    assert "autocast" not in inspect.getsource(trl_fixes.installed_method(GRPOTrainer._generate_single_turn))


def _sample_twice_per_prompt(model, tokenizer, tmp_path, sampling, content, generations, **config):
    """A GRPOTrainer on the CPU over two copies of one user prompt, ``generations`` samples each, samples one batch
    with ``sampling`` as its sampling method (seed 0); ``config`` goes to ``GRPOConfig``. Returns the token ids."""
    from datasets import Dataset
    from transformers import set_seed
    from trl import GRPOConfig, GRPOTrainer

    prompts = Dataset.from_list([{"prompt": [{"role": "user", "content": content}]}] * 2)
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=2 * generations,
                      num_generations=generations, use_cpu=True, report_to="none", save_strategy="no",
                      **config)  # fmt: skip
    trainer = GRPOTrainer(model=model, reward_funcs=lambda completions, **kw: [0.0] * len(completions), args=args,
                          train_dataset=prompts, processing_class=tokenizer)  # fmt: skip
    trainer.model_wrapped = trainer.accelerator.prepare(trainer.model)  # what train() does: autocast on forward
    prompt_ids = [tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=True, return_dict=False)
                  for p in prompts["prompt"] for _ in range(generations)]  # fmt: skip
    set_seed(0)
    ids, _ = sampling(trainer, prompt_ids, None, {}, generations)
    return ids


def _sample_in_bf16(model, tokenizer, tmp_path, sampling):
    """One bf16 GRPOTrainer on the CPU samples a batch with ``sampling`` as its sampling method: returns the token
    ids and how many float32 -> bf16 casts of a weight matrix the call made."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        ids = _sample_twice_per_prompt(model, tokenizer, tmp_path, sampling, "w1 w2", 2, bf16=True,
                                       max_completion_length=6)  # fmt: skip
    # the layers' weight matrices, by shape (the embedding is looked up, not cast; the LM head has the vocab's rows)
    shapes = {tuple(p.shape) for p in model.parameters() if p.dim() == 2 and p.shape[0] != len(tokenizer)}
    casts = [e for e in prof.events() if e.name == "aten::_to_copy" and e.input_shapes and
             tuple(e.input_shapes[0]) in shapes]  # fmt: skip
    return ids, len(casts)


def test_bf16_sampling_casts_each_weight_once_per_call_same_tokens(tiny_model, tiny_tokenizer, tmp_path):
    from trl import GRPOTrainer

    fixed = GRPOTrainer._generate_single_turn
    with_fix = _sample_in_bf16(tiny_model, tiny_tokenizer, tmp_path / "a", fixed)
    as_installed = _sample_in_bf16(tiny_model, tiny_tokenizer, tmp_path / "b", trl_fixes.installed_method(fixed))
    assert with_fix[0] == as_installed[0], "the same tokens"
    assert sum(map(len, with_fix[0])) > 4, "a comparison of empty completions proves nothing"
    # the tiny Llama's 7 weight matrices (q, k, v, o, gate, up, down): cast once in the call with the fix, and once
    # per forward pass as installed (42 = 7 x 6 when measured: the prompt's pass and 5 decoding steps)
    assert with_fix[1] == 7
    assert as_installed[1] >= 3 * with_fix[1]
    assert not torch.is_autocast_enabled("cpu"), "the region ended with the call"


#: Stop strings a random tiny model writes often: any lowercase letter (26 of the byte tokenizer's 259 tokens).
LETTERS = list("abcdefghijklmnopqrstuvwxyz")


def _sample(tmp_path, sampling, generation_kwargs, pad="<|im_end|>"):
    """A random one-layer Llama over the byte tokenizer samples 8 completions of up to 12 tokens in a float32
    GRPOTrainer with ``sampling`` as its sampling method; returns them as lists of tokens."""
    from test_tools import byte_tokenizer, tiny_config
    from transformers import LlamaForCausalLM

    tokenizer = byte_tokenizer()
    tokenizer.pad_token = pad
    torch.manual_seed(0)
    model = LlamaForCausalLM(tiny_config(tokenizer))
    ids = _sample_twice_per_prompt(model, tokenizer, tmp_path, sampling, "Hi", 4, max_completion_length=12,
                                   generation_kwargs=generation_kwargs)  # fmt: skip
    assert "generate" not in model.__dict__, "the tokenizer is given to that one call only"
    return [tokenizer.convert_ids_to_tokens(row) for row in ids]


def _first_letter(row: list[str]) -> int | None:
    return next((i for i, token in enumerate(row) if token in LETTERS), None)


def test_stop_strings_end_each_sampled_turn_at_the_first_one(tmp_path):
    """If the first assertion fails after a TRL upgrade, TRL now gives generate the tokenizer: delete the fix."""
    from trl import GRPOTrainer

    fixed = GRPOTrainer._generate_single_turn
    stop = {"stop_strings": LETTERS}
    with pytest.raises(ValueError, match="you must pass the model's tokenizer"):  # TRL as installed
        _sample(tmp_path / "a", trl_fixes.installed_method(fixed), stop)
    free = [row for row in _sample(tmp_path / "b", fixed, None) if _first_letter(row) is not None]
    assert any(len(row) > _first_letter(row) + 2 for row in free), "without stops, a sample writes on after a letter"
    stopped = _sample(tmp_path / "c", fixed, stop)
    ends = [row[_first_letter(row) + 1 :] for row in stopped if _first_letter(row) is not None]
    assert len(ends) >= 2 and all(end == ["<|im_end|>"] for end in ends), "each ends at its first letter, then the end"


def test_a_stopped_turn_without_padding_gets_the_end_of_sequence_token():
    from test_tools import byte_tokenizer

    tokenizer = byte_tokenizer()
    ids = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    end = tokenizer.eos_token_id
    rows = [ids("ab</tool_call>"), ids("ab</tool_call>") + [end], ids("ab</tool_call>x"), ids("a</tool_call>")]
    ended = trl_fixes.end_stopped_turns(rows, tokenizer, ["</tool_call>"], max_new_tokens=16)
    assert ended[0] == rows[0] + [end]  # stopped last in its batch, so no padding: its 14 tokens, then the end
    assert ended[1:3] == rows[1:3]  # padded already; or not stopped (it went on after the stop string)
    assert ended[3] == rows[3] + [end]
    # 14 tokens of 14 allowed: the limit ended it too, and there is no room for one more
    assert trl_fixes.end_stopped_turns(rows[:1], tokenizer, ["</tool_call>"], max_new_tokens=14) == rows[:1]


def test_stop_strings_need_padding_that_ends_a_sequence(tmp_path):
    from trl import GRPOTrainer

    # "<pad>" ends nothing, so TRL would keep a stopped row's pads in its completion: the fix says what to set
    named = r"GRPOConfig\(generation_kwargs=\{'stop_strings': \.\.\.\}\) needs a pad token .* pads with '<pad>'\. "
    with pytest.raises(ValueError, match=named + r"Set tokenizer\.pad_token = tokenizer\.eos_token"):
        _sample(tmp_path, GRPOTrainer._generate_single_turn, {"stop_strings": LETTERS}, pad="<pad>")


def _stop_tables(monkeypatch, tokenizer, method, calls=3):
    """``calls`` StopStringCriteria for the same stop string, each seeing the vocabulary in a new order (as a fast
    tokenizer lists it), with an empty cache and ``method`` as the cache lookup: how many tables were built, and
    the criteria."""
    import random
    from collections import OrderedDict

    from transformers.generation import stopping_criteria

    criteria = stopping_criteria.StopStringCriteria
    vocab, shuffles = sorted(tokenizer.get_vocab().items()), iter(range(1000))

    def get_vocab():
        items = list(vocab)
        random.Random(next(shuffles)).shuffle(items)
        return dict(items)

    built, build = [], criteria._stop_string_create_embedding_vec
    monkeypatch.setattr(tokenizer, "get_vocab", get_vocab)
    monkeypatch.setattr(criteria, "_stop_string_create_embedding_vec",
                        staticmethod(lambda *args: built.append(1) or build(*args)))  # fmt: skip
    monkeypatch.setattr(stopping_criteria, "STOP_STRING_EMBEDDING_CACHE", OrderedDict())
    monkeypatch.setattr(criteria, "clean_and_embed_tokens_with_cache", method)
    made = [criteria(tokenizer, ["</tool_call>"]) for _ in range(calls)]
    return len(built), made


def test_a_stop_strings_token_table_is_built_once_per_vocabulary(monkeypatch):
    """If the first assertion fails after a transformers upgrade, its cache now hits by itself: delete the fix."""
    from test_tools import byte_tokenizer
    from transformers.generation import stopping_criteria

    tokenizer = byte_tokenizer()
    fixed = stopping_criteria.StopStringCriteria.clean_and_embed_tokens_with_cache
    with monkeypatch.context() as patch:
        built_as_installed, as_installed = _stop_tables(patch, tokenizer, trl_fixes.installed_method(fixed))
    with monkeypatch.context() as patch:
        built_with_fix, with_fix = _stop_tables(patch, tokenizer, fixed)
    assert built_as_installed == 3, "as installed, a vocabulary in a new order misses the cache"
    assert built_with_fix == 1, "with the fix, one table serves every order"
    for made in with_fix[1:] + as_installed:  # the same table, whatever the order and the path
        assert torch.equal(made.embedding_vec, with_fix[0].embedding_vec)
        assert (made.max_valid_positions, made.max_valid_end_lens) == (
            with_fix[0].max_valid_positions, with_fix[0].max_valid_end_lens)  # fmt: skip
    ids = torch.tensor([tokenizer("ab</tool_call>", add_special_tokens=False)["input_ids"]])
    assert with_fix[0](ids, None).tolist() == [True], "and it stops where the stop string ends"
    assert with_fix[0](ids[:, :-1], None).tolist() == [False]
