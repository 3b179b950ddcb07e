"""Checks on the committed notebooks and code: no outputs, one parameters cell, consistent Colab links,
GRPOConfig keywords that exist in the installed TRL, and ruff."""

import ast
import dataclasses
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from repo_modules import REPO_ROOT, load
from trl import GRPOConfig, RewardConfig, SFTConfig

import course_utils

course_notebooks = load("scripts/notebook_runner.py").course_notebooks

NOTEBOOKS = course_notebooks()
ids = [p.stem for p in NOTEBOOKS]


def code_cells(path: Path):
    return [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_committed_notebook_has_no_outputs(path):
    dirty = [i for i, c in enumerate(code_cells(path)) if c.get("outputs") or c.get("execution_count")]
    assert not dirty, f"{path.name}: code cells {dirty} carry outputs; run `nbstripout {path}` before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_every_cell_has_its_own_id(path):
    # nbformat 4.5 requires an id on every cell; a cell added by a script without one makes nbformat warn
    # on every run (MissingIDFieldWarning), and a future nbformat refuses the file. Read raw, not normalised.
    raw = json.loads(path.read_text())
    cell_ids = [cell.get("id") for cell in raw["cells"]]
    missing = [i for i, cell_id in enumerate(cell_ids) if not isinstance(cell_id, str) or not cell_id]
    assert not missing, f"{path.name}: cells {missing} have no id; give each a unique one (e.g. '{path.stem[:2]}-NN')"
    assert len(set(cell_ids)) == len(cell_ids), f"{path.name}: cell ids repeat"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_one_parameters_cell_with_seed_and_preset(path):
    cells = [c for c in code_cells(path) if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, f"{path.name}: expected exactly one cell tagged 'parameters', found {len(cells)}"
    targets = [t for node in ast.parse(cells[0].source).body if isinstance(node, ast.Assign) for t in node.targets]
    assert all(isinstance(t, ast.Name) for t in targets), f"{path.name}: one name per assignment (papermill sets it)"
    assigned = {t.id for t in targets}
    assert {"seed", "preset"} <= assigned, f"{path.name}: the parameters cell must set seed and preset"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_tracking_is_one_parameter_away_and_off_by_default(path):
    cells = code_cells(path)
    parameters = next(c for c in cells if "parameters" in c.metadata.get("tags", []))
    defaults = {
        t.id: node.value
        for node in ast.parse(parameters.source).body
        if isinstance(node, ast.Assign)
        for t in node.targets
    }
    assert "report_to" in defaults, f'{path.name}: the parameters cell needs report_to = "none" (issue 7)'
    assert ast.literal_eval(defaults["report_to"]) == "none", f"{path.name}: tracking must be off by default"
    uses = [
        node
        for c in cells
        if c is not parameters
        for node in ast.walk(ast.parse(_without_magics(c.source)))
        if isinstance(node, ast.Name) and node.id == "report_to" and isinstance(node.ctx, ast.Load)
    ]
    assert uses, f"{path.name}: report_to is set in the parameters cell but no training reads it"


def _without_magics(source: str) -> str:
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_colab_badge_and_setup_match_the_repository_setting(path):
    nb = nbformat.read(path, as_version=4)
    expected = f"https://colab.research.google.com/github/{course_utils.REPOSITORY}/blob/main/notebooks/{path.name}"
    assert expected in nb.cells[0].source, f"{path.name}: first cell needs the Colab badge linking {expected}"
    assert f'REPOSITORY = "{course_utils.REPOSITORY}"' in "\n".join(c.source for c in code_cells(path))


MAX_CODE_CELL_LINES = 30  # the course rule: a learner reads a cell at a glance


def long_code_cells(path: Path, limit: int = MAX_CODE_CELL_LINES) -> list[tuple[int, int]]:
    """(index among all the notebook's cells, line count) of each code cell over ``limit`` lines."""
    cells = nbformat.read(path, as_version=4).cells
    return [
        (i, len(c.source.splitlines()))
        for i, c in enumerate(cells)
        if c.cell_type == "code" and len(c.source.splitlines()) > limit
    ]


def test_line_limit_finds_the_long_cell_and_names_it(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# title"),
        nbformat.v4.new_code_cell("\n".join(f"x{i} = {i}" for i in range(30))),  # 30 lines: allowed
        nbformat.v4.new_code_cell("\n".join(f"y{i} = {i}" for i in range(31))),  # 31 lines: one too many
        nbformat.v4.new_code_cell("\n".join(["record_results("] * 40)),  # a checks cell is no exception
    ]
    path = tmp_path / "01_demo.ipynb"
    nbformat.write(nb, path)
    assert long_code_cells(path) == [(2, 31), (3, 40)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_no_code_cell_over_30_lines(path):
    long = long_code_cells(path)
    where = ", ".join(f"cell {i} has {n} lines" for i, n in long)
    assert not long, (
        f"{path.name}: {where} (at most {MAX_CODE_CELL_LINES}); split each where the lesson takes a step, with a "
        "line of markdown between, or move bookkeeping into course_utils"
    )


CONFIG_FIELDS = {
    cls.__name__: {f.name for f in dataclasses.fields(cls)} for cls in (GRPOConfig, SFTConfig, RewardConfig)
}


def _mapping_keys(tree: ast.AST) -> dict[str, set[str]]:
    """The keys a name holds: ``NAME = {"k": ...}`` gives ``{"k"}``; for a dict of dicts, ``NAME = {"a": {"k": ...}}``,
    the inner keys, which ``NAME[...]`` and the values of ``for _, value in NAME.items()`` hold."""
    keys: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            values = node.value.values
            dicts = values if values and all(isinstance(v, ast.Dict) for v in values) else [node.value]
            found = {k.value for d in dicts for k in d.keys if isinstance(k, ast.Constant)}
            keys.update({t.id: found for t in node.targets if isinstance(t, ast.Name)})
    for node in ast.walk(tree):
        items = node.iter if isinstance(node, ast.For) else None
        if (isinstance(items, ast.Call) and getattr(items.func, "attr", "") == "items"
                and getattr(items.func.value, "id", None) in keys and isinstance(node.target, ast.Tuple)
                and isinstance(node.target.elts[-1], ast.Name)):  # fmt: skip
            keys[node.target.elts[-1].id] = keys[items.func.value.id]
    return keys


def notebook_code(path: Path) -> str:
    """The notebook's code cells as one Python source, shell (``!``) and magic (``%``) lines left out."""
    return "\n".join(c.source for c in code_cells(path) if not c.source.lstrip().startswith(("!", "%")))


def _mapping_name(kw: ast.keyword) -> str | None:
    """The name a ``**mapping`` keyword spreads: ``**settings`` and ``**OBJECTIVES[name]`` give the dict's name."""
    value = kw.value.value if isinstance(kw.value, ast.Subscript) else kw.value
    return value.id if isinstance(value, ast.Name) else None


def config_keywords(source: str, config: str = "GRPOConfig") -> set[str]:
    """Keywords passed to ``config(...)`` calls in ``source``. A ``**mapping`` counts with the keys of the dict
    literal it names (``**settings``, ``**OBJECTIVES[name]``, a loop's ``**objective``); any other is refused."""
    tree = ast.parse(source)
    mappings = _mapping_keys(tree)
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == config
    ]
    found = set()
    for kw in (kw for call in calls for kw in call.keywords):
        if kw.arg is not None:
            found.add(kw.arg)
        elif _mapping_name(kw) in mappings:
            found |= mappings[_mapping_name(kw)]
        else:
            return {"**<mapping>: write the keywords out, so this test can check them"}
    return found


def test_api_drift_detector_catches_removed_parameters():
    fields = CONFIG_FIELDS["GRPOConfig"]
    assert config_keywords("GRPOConfig(max_prompt_length=256, beta=0.0)") - fields == {"max_prompt_length"}
    assert config_keywords("GRPOConfig(**settings)") - fields  # a mapping whose keys the source does not show
    assert config_keywords("settings = {'beta': 0.0, 'max_prompt_length': 8}\nGRPOConfig(**settings)") - fields == {
        "max_prompt_length"}  # fmt: skip
    table = "OBJECTIVES = {'a': {'loss_type': 'grpo'}, 'b': {'max_prompt_length': 8}}\n"
    assert config_keywords(table + "GRPOConfig(**OBJECTIVES['a'])") - fields == {"max_prompt_length"}
    loop = table + "for name, objective in OBJECTIVES.items():\n    GRPOConfig(beta=0.0, **objective)"
    assert config_keywords(loop) - fields == {"max_prompt_length"}
    assert config_keywords("SFTConfig(max_seq_length=64)", "SFTConfig") - CONFIG_FIELDS["SFTConfig"]


@pytest.mark.parametrize("config", list(CONFIG_FIELDS))
@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_config_keywords_exist_in_installed_trl(path, config):
    source = notebook_code(path)
    unknown = config_keywords(source, config) - CONFIG_FIELDS[config]
    assert not unknown, f"{path.name}: {config} has no parameter(s) {sorted(unknown)} in the installed TRL"


# TRL's configs turn activation checkpointing on unless told otherwise. On a CPU it only costs time: notebook 12's
# reward model trained 2.3x slower with it, with the same losses (benchmarks/checkpointing_probe.py). Calls that
# train nothing of the course model's size are exempt, each for the reason given.
CHECKPOINTING_EXEMPT = {
    ("11_grpo_family", "proof_trainer"): "a 2-layer random model in float64: the objectives' arithmetic, no cost",
    ("11_grpo_family", "defaults"): "shows TRL's own defaults; trains nothing",
}


def configs_without(source: str, keyword: str) -> list[str]:
    """Where a TRL config call in ``source`` does not pass ``keyword``: the enclosing function's name, else the
    assigned name (``config = SFTConfig(...)`` at top level gives ``config``). A ``**mapping`` passes it only if the
    dict literal it names has the key (as in :func:`config_keywords`)."""
    tree = ast.parse(source)
    mappings = _mapping_keys(tree)
    missing = []

    def passes(kw: ast.keyword) -> bool:
        return kw.arg == keyword or (kw.arg is None and keyword in mappings.get(_mapping_name(kw), set()))

    def visit(node: ast.AST, where: str) -> None:
        if isinstance(node, ast.FunctionDef):
            where = node.name
        elif isinstance(node, ast.Assign) and where == "<cell>" and isinstance(node.targets[0], ast.Name):
            where = node.targets[0].id
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in CONFIG_FIELDS:
            if not any(passes(kw) for kw in node.keywords):
                missing.append(where)
        for child in ast.iter_child_nodes(node):
            visit(child, where)

    for statement in tree.body:
        visit(statement, "<cell>")
    return missing


def test_checkpointing_finder_names_the_call_that_leaves_it_to_trl():
    source = "a = SFTConfig(bf16=False)\ndef run():\n    return GRPOConfig(activation_checkpointing=False)\n"
    assert configs_without(source, "activation_checkpointing") == ["a"]  # run() passes it; a leaves TRL's True
    assert configs_without("def f():\n    c = RewardConfig(seed=0)", "activation_checkpointing") == ["f"]
    without = "T = {'a': {'beta': 0.0}}\n"  # a ** mapping passes it only if the dict literal has the key
    assert configs_without(without + "x = GRPOConfig(**T['a'])", "activation_checkpointing") == ["x"]
    with_it = "T = {'a': {'beta': 0.0, 'activation_checkpointing': False}}\n"
    assert configs_without(with_it + "for _, o in T.items():\n    GRPOConfig(**o)", "activation_checkpointing") == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_every_training_config_sets_activation_checkpointing(path):
    source = notebook_code(path)
    missing = configs_without(source, "activation_checkpointing")
    missing = [where for where in missing if (path.stem, where) not in CHECKPOINTING_EXEMPT]
    assert not missing, (
        f"{path.name}: a TRL config in {missing} leaves activation_checkpointing to TRL, which turns it on; pass "
        "activation_checkpointing=P.activation_checkpointing (off on a CPU, where it only costs time)"
    )


def test_ruff_on_code_and_notebooks():
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    result = subprocess.run(  # what to check is pyproject.toml's [tool.ruff] and .gitignore: the one definition
        [ruff, "check"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _make_pytest_args(target: str) -> list[str]:
    """The pytest arguments ``make <target>`` would run (a dry run, with set-up left out)."""
    dry = subprocess.run(
        ["make", "-n", target, "STAMP=", "PYTEST_ARGS="], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    line = next(line for line in dry.stdout.splitlines() if " -m pytest" in line)
    return shlex.split(line.split(" -m pytest", 1)[1].split(";")[0])  # up to the next command on the line


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_ci_runs_every_test_and_make_unit_leaves_out_only_the_notebooks_and_the_slow_ones():
    from _pytest.mark.expression import Expression  # how pytest itself evaluates -m

    assert re.search(r"^make test$", (REPO_ROOT / ".ci" / "run").read_text(), re.M), ".ci/run must run make test"
    selecting = {"-m", "-k", "--deselect", "--ignore", "--lf"}
    test = _make_pytest_args("test")  # its first part: every test but the notebooks, which run side by side after
    assert test[:2] == ["-m", "not notebook"] and not selecting & set(test[2:]), "make test must run every test"
    # ... and the second part runs every notebook test: they are all in test_notebooks.py, one per notebook
    marked = [p.name for p in (REPO_ROOT / "tests").glob("*.py") if re.search(r"mark\.notebook\b", p.read_text())]
    assert marked == ["test_notebooks.py"], f"scripts/notebook_tests.py runs only test_notebooks.py's: {marked}"
    import test_notebooks as notebooks

    scheduler = load("scripts/notebook_tests.py")
    assert scheduler.TEST == f"tests/test_notebooks.py::{notebooks.test_notebook_runs_and_learns_in_ci_mode.__name__}"
    assert scheduler.course_notebooks() == notebooks.NOTEBOOKS

    unit = _make_pytest_args("unit")
    selected = Expression.compile(unit[unit.index("-m") + 1])
    marked = {"no mark": set(), "notebook": {"notebook"}, "slow": {"slow"}, "both": {"notebook", "slow"}}
    runs = {name: selected.evaluate(lambda mark, marks=marks: mark in marks) for name, marks in marked.items()}
    assert runs == {"no mark": True, "notebook": False, "slow": False, "both": False}


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_the_browser_test_runs_in_make_ui_test_and_is_skipped_by_make_test_and_make_unit():
    from conftest import ui_requested  # tests marked ui are skipped unless this says -m asks for them

    def markexpr(target: str) -> str:
        args = _make_pytest_args(target)
        return args[args.index("-m") + 1] if "-m" in args else ""

    assert ui_requested(markexpr("ui-test")) and "tests/test_jupyterlab_ui.py" in _make_pytest_args("ui-test")
    assert not ui_requested(markexpr("test")) and not ui_requested(markexpr("unit"))
    assert ui_requested("ui or slow") and not ui_requested("build") and not ui_requested("")
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert re.search(r"command -v chromium .*command -v chromedriver.*\n\s*make ui-test$", ci, re.M), (
        "CI runs make ui-test where the browser is installed"
    )


def test_no_remote_code_and_no_pickled_weights():
    """Nothing in the course runs code from a model repository, or saves weights as pickle."""
    code_dirs = ("course_utils", "scripts", "benchmarks", "data")
    sources = {p: p.read_text() for d in code_dirs for p in (REPO_ROOT / d).rglob("*.py")}
    sources |= {p: "\n".join(c.source for c in code_cells(p)) for p in NOTEBOOKS}
    for path, text in sources.items():
        assert not re.search(r"trust_remote_code\s*=\s*True", text), f"{path.name} enables trust_remote_code"
        assert not re.search(r"safe_serialization\s*=\s*False", text), f"{path.name} saves pickled weights"


CHECKS_TITLE = re.compile(r"^## \d+ · Did it learn\? The checks this notebook stands on$", re.MULTILINE)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_one_checks_section_with_the_course_title(path):
    """A learner finds the proof under the same heading in every notebook."""
    cells = nbformat.read(path, as_version=4).cells
    found = [m.group(0) for c in cells if c.cell_type == "markdown" for m in CHECKS_TITLE.finditer(c.source)]
    assert len(found) == 1, f"{path.name}: expected one '## N · Did it learn? The checks this notebook stands on'"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_exercises_end_with_a_check_cell_whose_solution_is_tested(path):
    """The template: exercises, then at least one check cell (a ``course_utils.exercises.check_*`` call on the
    learner's code), whose reference answer in ``solutions/`` is run by tests/test_exercises.py."""
    cells = nbformat.read(path, as_version=4).cells
    start = [i for i, c in enumerate(cells) if c.cell_type == "markdown" and "## Exercises" in c.source]
    assert len(start) == 1, f"{path.name}: expected one '## Exercises' section"
    checks = [m for c in cells[start[0] + 1 :] if c.cell_type == "code"
              for m in re.findall(r"from course_utils\.exercises import (check_\w+)", c.source)]  # fmt: skip
    assert checks, f"{path.name}: no check cell after its exercises (course_utils.exercises.check_*)"
    tests = (REPO_ROOT / "tests" / "test_exercises.py").read_text()
    solutions = (REPO_ROOT / "notebooks" / "solutions" / f"{path.stem}.md").read_text()
    assert "# checked by tests/test_exercises.py" in solutions, f"solutions/{path.stem}.md: no checked solution"
    for check in checks:
        assert f"exercises.{check}(" in tests or f"exercises.{check}," in tests, f"{check} is not tested"


SAVING_METHODS = {"save_model", "save_pretrained", "save_state"}
TRAINING_CONFIGS = {"GRPOConfig", "SFTConfig", "RewardConfig", "TrainingArguments"}


def writes_outside_new_run_folders(source: str) -> list[str]:
    """Lines that could overwrite or delete an earlier run's files: a save, or a training config that saves
    checkpoints (``save_strategy`` other than ``"no"``), into a folder not made by ``new_run_dir``; and any
    ``rmtree``, ``unlink`` or ``os.remove``. A config trains when it sets ``max_steps`` or ``num_train_epochs``;
    the course's other configs only show a setting or check a loss. A name counts as a new run folder when it
    is assigned from an expression that calls ``new_run_dir`` or uses such a name (``adapter = out / "adapter"``).
    """
    tree = ast.parse(source)
    fresh: set[str] = set()

    def is_fresh(node: ast.AST) -> bool:
        return any(
            (isinstance(n, ast.Call) and getattr(n.func, "id", None) == "new_run_dir")
            or (isinstance(n, ast.Name) and n.id in fresh)
            for n in ast.walk(node)
        )

    assignments = [n for n in ast.walk(tree) if isinstance(n, ast.Assign)]
    for _ in range(2):  # twice, so a chain resolves whatever the order of its assignments
        for a in assignments:
            if is_fresh(a.value):
                fresh.update(t.id for t in a.targets if isinstance(t, ast.Name))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        keywords = {kw.arg: kw.value for kw in node.keywords if kw.arg}
        is_os_remove = name == "remove" and getattr(getattr(node.func, "value", None), "id", None) == "os"  # not list's
        if name in {"rmtree", "unlink"} or is_os_remove:
            found.append(f"line {node.lineno}: {name}")
        elif name in SAVING_METHODS and not (node.args and is_fresh(node.args[0])):
            found.append(f"line {node.lineno}: {name} outside a new_run_dir folder")
        elif name in TRAINING_CONFIGS:
            strategy = keywords.get("save_strategy")
            trains = {"max_steps", "num_train_epochs"} & set(keywords)
            saves = trains and not (isinstance(strategy, ast.Constant) and strategy.value == "no")
            if saves and not ("output_dir" in keywords and is_fresh(keywords["output_dir"])):
                found.append(f"line {node.lineno}: {name} saves checkpoints outside a new_run_dir folder")
    return found


def test_the_writes_finder_names_what_could_overwrite_an_earlier_run():
    source = (
        "import shutil\nshutil.rmtree('outputs/x')\n"  # line 2
        "names.remove('x')\n"  # line 3: a list's remove, not a file's (os.remove would be named)
        "trainer.save_model('outputs/fixed')\n"  # line 4: a fixed folder, overwritten by the next run
        "out = new_run_dir('outputs/nb')\nadapter = out / 'adapter'\ntrainer.save_model(str(adapter))\n"  # fine
        "GRPOConfig(output_dir='outputs/a', save_strategy='no')\n"  # fine: saves nothing
        "GRPOConfig(output_dir='outputs/b', max_steps=8)\n"  # line 9: TRL's default save_strategy saves there
        "GRPOConfig(output_dir='outputs/c')\n"  # fine: no steps, so never trained (it shows a setting)
        "SFTConfig(output_dir=str(out / 'trainer'), max_steps=8, save_strategy='steps')\n"  # fine: a new folder
        "os.remove('outputs/results.json')\n"  # line 12
    )
    assert writes_outside_new_run_folders(source) == [
        "line 2: rmtree", "line 4: save_model outside a new_run_dir folder",
        "line 9: GRPOConfig saves checkpoints outside a new_run_dir folder", "line 12: remove",
    ]  # fmt: skip


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_no_notebook_overwrites_or_deletes_an_earlier_run(path):
    found = writes_outside_new_run_folders(notebook_code(path))
    assert not found, (
        f"{path.name}: {found}. Save into a folder from course_utils.outputs.new_run_dir (a new one per run), "
        'or pass save_strategy="no"; never delete a folder a learner may still want.'
    )
