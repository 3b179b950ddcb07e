"""TRL_REWARD_ARGUMENTS and the preflight reward probe against what the installed TRL really passes a reward.

A real GRPOTrainer step (a tiny random Llama and a word-level tokenizer built here: no Hub, no course model)
calls a reward that records its keyword arguments. If a TRL upgrade adds, renames or drops one, this fails.
"""

import inspect
import re

import pytest
import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, TrainerState
from trl import GRPOConfig, GRPOTrainer

from course_utils.preflight import TRL_REWARD_ARGUMENTS, probe_batch

WORDS = "user assistant system : what is two plus three five seven the answer apples pears".split()


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{w: i + 3 for i, w in enumerate(WORDS)}}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    tokenizer.chat_template = (
        "{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} {% endfor %}"
        "{% if add_generation_prompt %}assistant : {% endif %}"
    )
    return tokenizer


def tiny_model(vocab_size: int) -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0, eos_token_id=1, bos_token_id=None,
    )  # fmt: skip
    return LlamaForCausalLM(config)


def dataset(chat: bool) -> Dataset:
    questions = ["what is two plus three", "what is two plus five"]
    prompts = [[{"role": "user", "content": q}] for q in questions] if chat else questions
    return Dataset.from_dict({"prompt": prompts, "answer": ["five", "seven"], "topic": ["apples", "pears"]})


@pytest.mark.parametrize("chat", [True, False], ids=["conversational", "standard"])
def test_trl_passes_rewards_exactly_what_preflight_assumes(tmp_path, chat):
    calls = []

    def recorder(**kwargs):
        calls.append(kwargs)
        return [0.0] * len(kwargs["completions"])

    tokenizer = tiny_tokenizer()
    data = dataset(chat)
    config = GRPOConfig(
        output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4, num_generations=2,
        max_completion_length=4, logging_steps=1, save_strategy="no", report_to="none", bf16=False, use_cpu=True,
        seed=0,
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=tiny_model(len(tokenizer)), reward_funcs=recorder, args=config, train_dataset=data,
        processing_class=tokenizer,
    )  # fmt: skip
    trainer.train()

    assert calls, "GRPOTrainer never called the reward"
    passed = calls[0]
    columns = {"answer", "topic"}  # every dataset column but "prompt"
    # environments is passed only when the trainer has environments (TRL's tool-use loop), not here
    assert set(passed) == (TRL_REWARD_ARGUMENTS - {"environments"}) | columns
    n = len(passed["completions"])
    assert n == 4 and all(len(passed[c]) == n for c in ("prompts", "completion_ids", *columns))
    assert isinstance(passed["trainer_state"], TrainerState)

    probe = probe_batch(data, tokenizer, max_steps=1)
    assert set(probe) == set(passed), "the preflight probe passes the same names as TRL"
    for name in ("prompts", "completions", "completion_ids", *columns):
        assert type(probe[name][0]) is type(passed[name][0]), name
    if chat:
        assert passed["completions"][0][0]["role"] == probe["completions"][0][0]["role"] == "assistant"
        assert set(passed["completions"][0][0]) == set(probe["completions"][0][0])
    assert all(isinstance(i, int) for ids in passed["completion_ids"] + probe["completion_ids"] for i in ids)


def test_the_names_in_trls_reward_call_are_trl_reward_arguments():
    """Read from the installed TRL's source: the keywords of the reward call and every reward_kwargs key it sets."""
    source = inspect.getsource(GRPOTrainer._calculate_rewards)
    calls = re.findall(r"reward_func\((.*?)\*\*reward_kwargs", source, re.DOTALL)
    assert calls, "GRPOTrainer._calculate_rewards no longer calls reward_func(..., **reward_kwargs): re-read TRL"
    named = {name for call in calls for name in re.findall(r"(\w+)=", call)}
    set_here = set(re.findall(r'\breward_kwargs\["(\w+)"\]\s*=', source))  # \b: not row_reward_kwargs
    assert named | set_here == TRL_REWARD_ARGUMENTS
