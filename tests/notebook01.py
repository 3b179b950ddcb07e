"""Notebook 01's recipe as the notebook writes it, read from its cells with ``ast`` (nothing in it runs).

Tests compare the code that runs the recipe outside the notebook (``course_utils.recipes``, the script, the
benchmark) with these values, so that a change made in the notebook alone fails a test instead of drifting.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO_ROOT / "notebooks" / "01_first_grpo_run.ipynb"


def _cells(tag: str | None = None) -> list[ast.Module]:
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    return [
        ast.parse("".join(c["source"]))
        for c in cells
        if c["cell_type"] == "code" and (tag is None or tag in c["metadata"].get("tags", []))
    ]


def assignments(tag: str | None = None) -> dict[str, Any]:
    """``name = literal`` statements at the top level of the code cells (with ``tag``, those cells only)."""
    values = {}
    for cell in _cells(tag):
        for node in cell.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                try:
                    values[node.targets[0].id] = ast.literal_eval(node.value)
                except ValueError:
                    continue  # not a literal: computed in the notebook
    return values


def parameters() -> dict[str, Any]:
    """The papermill ``parameters`` cell's values."""
    return assignments("parameters")


def call_keywords(function: str, namespace: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of the notebook's one call to ``function``, each evaluated in ``namespace``."""
    calls = [
        node
        for cell in _cells()
        for node in ast.walk(cell)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == function
    ]
    assert len(calls) == 1, f"{NOTEBOOK.name} should call {function}(...) once; it calls it {len(calls)} times"
    values = {}
    for keyword in calls[0].keywords:
        assert keyword.arg is not None, f"{function}(**...) in {NOTEBOOK.name}: write the keywords out"
        code = compile(ast.Expression(keyword.value), str(NOTEBOOK), "eval")
        values[keyword.arg] = eval(code, {}, dict(namespace))  # only the notebook's own expressions
    return values


def grpo_config_keywords(preset) -> dict[str, Any]:
    """Notebook 01's ``GRPOConfig(...)`` keywords, with its parameters' values and ``P = preset``."""
    return call_keywords("GRPOConfig", {**parameters(), "P": preset})


def differences(config, keywords: dict[str, Any], ignore: set[str] = frozenset()) -> dict[str, tuple[Any, Any]]:
    """``{field: (config's value, the notebook's)}`` for every GRPOConfig field that differs, but ``ignore``."""
    from trl import GRPOConfig

    expected = GRPOConfig(**keywords).to_dict()
    actual = config.to_dict()
    return {k: (actual[k], expected[k]) for k in expected if k not in ignore and actual[k] != expected[k]}
