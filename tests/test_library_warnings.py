"""The three library notices are hidden once course_utils.models is imported; every other warning still shows."""

import subprocess
import sys
import warnings

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from trl import GRPOConfig

from course_utils.library_warnings import HIDDEN, hide_library_warnings


def shown(action) -> list[str]:
    """The warnings ``action`` raises under the course's filters (recorded, not printed)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hide_library_warnings()  # catch_warnings starts from the filters above; add the course's in front
        action()
    return [str(w.message) for w in caught]


def test_the_libraries_own_triggers_print_nothing(tmp_path):
    tiny = LlamaForCausalLM(LlamaConfig(vocab_size=16, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                                        num_attention_heads=2, num_key_value_heads=2))
    assert shown(lambda: tiny.is_gradient_checkpointing) == []  # TRL reads it whenever it samples
    assert shown(lambda: GRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none")) == []
    loader = torch.utils.data.DataLoader([1, 2], pin_memory=True)
    if not torch.accelerator.is_available():  # the notice is about a machine without one
        assert shown(lambda: iter(loader)) == []


@pytest.mark.parametrize(("start", "category"), HIDDEN)
def test_only_the_exact_message_and_category_are_hidden(start, category):
    assert shown(lambda: warnings.warn(start + " (rest of the message)", category, stacklevel=2)) == []
    other = UserWarning if category is FutureWarning else FutureWarning
    assert shown(lambda: warnings.warn(start, other, stacklevel=2)) == [start]  # another category still shows
    later = "Note: " + start  # the filter matches from the message's start
    assert shown(lambda: warnings.warn(later, category, stacklevel=2)) == [later]


def test_a_notebook_that_imports_course_utils_models_sees_none_of_them():
    """In a fresh interpreter, as a notebook's kernel is: the import alone installs the filters."""
    script = (
        "import course_utils.models\n"
        "from transformers import LlamaConfig, LlamaForCausalLM\n"
        "LlamaForCausalLM(LlamaConfig(vocab_size=16, hidden_size=8, intermediate_size=16, num_hidden_layers=1,"
        " num_attention_heads=2, num_key_value_heads=2)).is_gradient_checkpointing\n"
        "import warnings; warnings.warn('a warning of your own', UserWarning)\n"
    )
    result = subprocess.run([sys.executable, "-W", "always", "-c", script], capture_output=True, text=True,
                            timeout=300, check=True)
    assert "is_gradient_checkpointing" not in result.stderr
    assert "a warning of your own" in result.stderr  # every other warning still shows
