"""Notebook 01's recipe has one home in code (course_utils.recipes), and the notebook still says the same.

The notebook keeps its parameters and its GRPOConfig literal, for the learner to read; these tests read them
with ``ast`` and fail when the notebook and the code differ, e.g. after a learning rate changed in one only.
"""

import inspect

import pytest
from notebook01 import assignments, differences, grpo_config_keywords, parameters

from course_utils import recipes
from course_utils.hardware import Hardware
from course_utils.presets import get_preset
from course_utils.rewards import make_length_reward

CPU = Hardware(kind="cpu", device="cpu", name="CPU")


def test_parameters_cell_matches_the_recipe_constants():
    params = parameters()
    assert params["system_prompt"] == recipes.SYSTEM_PROMPT
    assert params["target_chars"] == recipes.TARGET_CHARS
    assert params["learning_rate"] == recipes.LEARNING_RATE
    assert params["beta"] == recipes.BETA


def test_reward_penalty_matches_the_length_reward():
    default = inspect.signature(make_length_reward).parameters["truncation_penalty"].default
    assert assignments()["truncation_penalty"] == default


@pytest.mark.parametrize("preset_name", ["cpu-ci", "cpu"])
def test_length_recipe_config_is_notebook_01s_grpo_config(preset_name):
    preset = get_preset(preset_name, CPU)
    notebook = grpo_config_keywords(preset)
    params = parameters()
    config = recipes.length_recipe_config(
        preset, notebook["output_dir"], report_to=params["report_to"], seed=params["seed"]
    )
    assert differences(config, notebook) == {}, "notebook 01 and course_utils/recipes.py differ (config, notebook)"


def test_a_change_in_the_notebook_alone_is_reported():
    preset = get_preset("cpu-ci", CPU)
    notebook = grpo_config_keywords(preset)
    config = recipes.length_recipe_config(preset, notebook["output_dir"])
    drifted = {**notebook, "learning_rate": 1e-4, "temperature": 0.7}
    assert differences(config, drifted) == {"learning_rate": (recipes.LEARNING_RATE, 1e-4), "temperature": (1.0, 0.7)}
    assert differences(config, drifted, ignore={"learning_rate", "temperature"}) == {}


def _parameters_cell(notebook) -> dict:
    import ast
    import json

    cell = next(c for c in json.loads(notebook.read_text())["cells"] if "parameters" in c["metadata"].get("tags", []))
    tree = ast.parse("".join(cell["source"]))
    return {n.targets[0].id: ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)}


LENGTH_TASK_NOTEBOOKS = ["03_hyperparameters_and_metrics", "05_lora_merge_and_inference", "06_grpo_from_scratch",
                         "07_reward_hacking_and_debugging"]  # fmt: skip


@pytest.mark.parametrize("stem", LENGTH_TASK_NOTEBOOKS)
def test_length_task_notebooks_ask_notebook_01s_question(stem):
    """Each keeps its system prompt and target literal for the learner; they must not drift from 01's task."""
    from notebook01 import REPO_ROOT

    params = _parameters_cell(REPO_ROOT / "notebooks" / f"{stem}.ipynb")
    assert params["system_prompt"] == recipes.SYSTEM_PROMPT, f"{stem}: system_prompt differs from notebook 01's"
    assert params["target_chars"] == recipes.TARGET_CHARS, f"{stem}: target_chars differs from notebook 01's"
