import pytest
import torch

from course_utils.data import arithmetic_problems, to_conversational
from course_utils.evaluation import evaluate_answers
from course_utils.models import load_model
from course_utils.presets import get_preset
from course_utils.rewards import REASONING_SYSTEM_PROMPT
from course_utils.warm_start import supervised_warm_start

PRESET = get_preset("cpu-ci", task="arithmetic")


@pytest.fixture(autouse=True)
def _leave_the_learners_cache_alone(monkeypatch):
    """No test here reuses or stores a warm start, except through ``course_cache`` (a cache in tmp_path)."""
    monkeypatch.setenv("GRPO_COURSE_REUSE", "0")


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


# --- train_or_reuse: the warm start is trained once per machine and reused bit for bit -------------------


def _fresh_model(tiny_config):
    """The same randomly initialised tiny Llama every call (seed 0), in train mode like ``tiny_model``."""
    from transformers import LlamaForCausalLM

    with torch.random.fork_rng():
        torch.manual_seed(0)
        return LlamaForCausalLM(tiny_config).train()


def _trainer(model, tokenizer, tmp_path, rows=None, callbacks=None, **settings):
    from trl import SFTConfig, SFTTrainer

    from course_utils.data import worked_examples

    rows = rows if rows is not None else arithmetic_problems("add1", n_train=12, n_test=2, seed=0)["train"]
    config = {"output_dir": str(tmp_path / "out"), "max_steps": 2, "per_device_train_batch_size": 4,
              "learning_rate": 1e-2, "report_to": "none", "save_strategy": "no", "bf16": False, "seed": 0,
              **settings}  # fmt: skip
    return SFTTrainer(model=model, args=SFTConfig(**config), train_dataset=worked_examples(rows, n=8),
                      processing_class=tokenizer, callbacks=callbacks)  # fmt: skip


@pytest.fixture
def course_cache(tmp_path, monkeypatch):
    from course_utils.cache import CACHE_ENV
    from course_utils.warm_start import REUSE_ENV

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(REUSE_ENV, raising=False)
    return tmp_path / "cache" / "warm-starts"


def test_a_second_identical_warm_start_loads_the_first_ones_weights_and_random_state(
    tiny_config, tiny_tokenizer, tmp_path, course_cache, capsys
):
    from course_utils.warm_start import train_or_reuse

    first = _trainer(_fresh_model(tiny_config), tiny_tokenizer, tmp_path)
    trained = train_or_reuse(first)
    after_training = torch.get_rng_state()
    assert len(list(course_cache.iterdir())) == 1, "one entry stored"
    torch.manual_seed(123)  # anything the notebook did in between
    second = _trainer(_fresh_model(tiny_config), tiny_tokenizer, tmp_path, output_dir=str(tmp_path / "other"),
                      logging_steps=1, disable_tqdm=True)  # fmt: skip
    second.train = lambda *a, **k: pytest.fail("a cache hit must not train")
    reused = train_or_reuse(second)
    assert reused is second.model, "loaded in place into the caller's model"
    for (name, a), b in zip(trained.state_dict().items(), reused.state_dict().values(), strict=True):
        assert torch.equal(a, b), f"{name} differs from the trained weights"
    assert torch.equal(torch.get_rng_state(), after_training), "the random state ends as training left it"
    assert reused.training == trained.training
    assert second.state.log_history == first.state.log_history
    assert "Reused the warm start" in capsys.readouterr().out


@pytest.mark.parametrize(
    "change",
    [
        {"learning_rate": 2e-2},
        {"seed": 1},
        {"max_steps": 3},
        {"rows": "other"},
        {"weights": "nudged"},
    ],
    ids=["learning rate", "seed", "steps", "data", "start weights"],
)
def test_any_change_that_decides_the_weights_trains_again(tiny_config, tiny_tokenizer, tmp_path, course_cache, change):
    from course_utils.warm_start import warm_start_key

    model = _fresh_model(tiny_config)
    key = warm_start_key(_trainer(model, tiny_tokenizer, tmp_path))
    other = _fresh_model(tiny_config)
    settings = {k: v for k, v in change.items() if k not in {"rows", "weights"}}
    rows = arithmetic_problems("add1", n_train=12, n_test=2, seed=1)["train"] if "rows" in change else None
    if "weights" in change:
        with torch.no_grad():
            next(other.parameters())[0, 0] += 1e-6
    assert warm_start_key(_trainer(other, tiny_tokenizer, tmp_path, rows=rows, **settings)) != key


def test_the_trl_fixes_applied_are_part_of_the_key(tiny_config, tiny_tokenizer, tmp_path, course_cache, monkeypatch):
    """A fix of course_utils.trl_fixes can change a gradient's float32 rounding: a warm start trained without it is
    not the one this process would train."""
    from course_utils import trl_fixes
    from course_utils.warm_start import warm_start_key

    monkeypatch.setattr(trl_fixes, "_applied", [trl_fixes.COMPACT_FIX])
    key = warm_start_key(_trainer(_fresh_model(tiny_config), tiny_tokenizer, tmp_path))
    monkeypatch.setattr(trl_fixes, "_applied", [])
    assert warm_start_key(_trainer(_fresh_model(tiny_config), tiny_tokenizer, tmp_path)) != key


def test_where_and_how_a_run_reports_does_not_change_the_key(tiny_config, tiny_tokenizer, tmp_path, course_cache):
    from course_utils.warm_start import warm_start_key

    key = warm_start_key(_trainer(_fresh_model(tiny_config), tiny_tokenizer, tmp_path))
    other = _trainer(_fresh_model(tiny_config), tiny_tokenizer, tmp_path, output_dir=str(tmp_path / "elsewhere"),
                     logging_steps=1, disable_tqdm=True, save_strategy="steps", save_steps=100)  # fmt: skip
    assert warm_start_key(other) == key


def test_a_callback_of_your_own_is_part_of_the_key(tiny_config, tiny_tokenizer, tmp_path, course_cache):
    from transformers import TrainerCallback

    from course_utils.warm_start import warm_start_key

    class StopEarly(TrainerCallback):  # a learner's callback can change what training does
        def on_step_end(self, args, state, control, **kwargs):
            control.should_training_stop = True

    key = warm_start_key(_trainer(_fresh_model(tiny_config), tiny_tokenizer, tmp_path))
    assert warm_start_key(_trainer(_fresh_model(tiny_config), tiny_tokenizer, tmp_path, callbacks=[StopEarly()])) != key


def test_reuse_0_trains_and_leaves_the_cache_alone(tiny_config, tiny_tokenizer, tmp_path, course_cache, monkeypatch):
    from course_utils.warm_start import REUSE_ENV, train_or_reuse

    monkeypatch.setenv(REUSE_ENV, "0")
    trainer = _trainer(_fresh_model(tiny_config), tiny_tokenizer, tmp_path)
    train_or_reuse(trainer)
    assert trainer.state.global_step == 2 and not course_cache.exists()
    monkeypatch.setenv(REUSE_ENV, "no")
    with pytest.raises(ValueError, match=r"GRPO_COURSE_REUSE='no' is not understood: set it to 1 .* or 0"):
        train_or_reuse(trainer)


def test_a_damaged_entry_is_trained_again_and_replaced(tiny_config, tiny_tokenizer, tmp_path, course_cache, capsys):
    from course_utils.warm_start import train_or_reuse

    first = train_or_reuse(_trainer(_fresh_model(tiny_config), tiny_tokenizer, tmp_path))
    (entry,) = course_cache.iterdir()
    weights = entry / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8])  # truncated, as by a full disk
    second = _trainer(_fresh_model(tiny_config), tiny_tokenizer, tmp_path)
    retrained = train_or_reuse(second)
    assert "unusable (its weights file is not the one written); training it again" in capsys.readouterr().out
    assert second.state.global_step == 2, "trained, not loaded"
    pairs = zip(first.state_dict().values(), retrained.state_dict().values(), strict=True)
    assert all(torch.equal(a, b) for a, b in pairs), "the same recipe trains the same weights"
    assert [p.name for p in course_cache.iterdir()] == [entry.name] and weights.stat().st_size > 8


def test_the_cache_keeps_the_most_recently_used_warm_starts(tmp_path):
    import os

    from course_utils.warm_start import _evict

    for i in range(6):  # sft-0 oldest ... sft-5 newest, plus another run's partial build and a user's file
        (tmp_path / f"sft-{i}").mkdir()
        (tmp_path / f"sft-{i}" / "warm_start.json").write_text("{}")
        os.utime(tmp_path / f"sft-{i}" / "warm_start.json", (1000 + i, 1000 + i))
    (tmp_path / "sft-9.partial-123").mkdir()
    (tmp_path / "my-notes.txt").write_text("mine")
    _evict(tmp_path, keep=4)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "my-notes.txt", "sft-2", "sft-3", "sft-4", "sft-5", "sft-9.partial-123",
    ]  # fmt: skip
