"""Notebook 01 as a learner runs it: opened in JupyterLab in headless Chromium and run from the Run menu.

``make ui-test`` runs this (``pytest -m ui``); ``make test`` and ``make unit`` skip it (tests/conftest.py): it
trains for minutes. It needs Debian's ``chromium`` and ``chromium-driver`` (``make ui-setup``) and selenium
(requirements-dev.txt), and is skipped, saying so, without them.

JupyterLab serves a temporary copy of the notebook (the committed one is never opened, so never saved over),
with copies of the repository's data/, scripts/ and configs/ beside it as in the repository, on
a free port of 127.0.0.1 with a random token, with ``COURSE_PRESET=cpu-ci`` (``preset="auto"`` reads it) and
``HF_HUB_OFFLINE=1``; the kernel imports this checkout's ``course_utils`` (``PYTHONPATH``). The browser clicks
Run > Run All Cells and waits until every cell ran. Then, in what the browser rendered: the live reward plot is
an image in the training cell, shown while that cell was still running; the checks cell shows ``[PASS]`` lines
(course_utils.results.record_results) and no ``[FAIL]``; no cell shows an error. Screenshots go to runs/ui/.

``UI_TEST_NOTEBOOK=path.ipynb`` runs another notebook: its plot cell is the one whose code constructs
``LiveRewardPlot(``, its checks cell the one that calls ``record_results(``. A notebook that draws no live plot
(03, 06, 10-12) must instead show its figures, rendered, after the run; 09 draws none, so it fails here.
``UI_TEST_TIMEOUT`` (seconds, default 1200) bounds the run.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from repo_modules import REPO_ROOT

pytestmark = pytest.mark.ui

NOTEBOOK = Path(os.environ.get("UI_TEST_NOTEBOOK") or REPO_ROOT / "notebooks" / "01_first_grpo_run.ipynb")
RUN_TIMEOUT = float(os.environ.get("UI_TEST_TIMEOUT", "1200"))
SCREENSHOTS = REPO_ROOT / "runs" / "ui"
PLOT_CELL, CHECKS_CELL = "LiveRewardPlot(", "record_results("
REPOSITORY_FOLDERS = ("data", "scripts", "configs")  # read by notebooks from ../ (course_utils: PYTHONPATH)
#: JupyterLab settings for the run (its own settings folder: the user's are neither read nor changed). Every
#: cell stays in the page (no windowing), nothing is autosaved, nothing is fetched from the internet.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
}


def _missing_browser_tools() -> str | None:
    missing = [name for name in ("chromium", "chromedriver") if shutil.which(name) is None]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (requirements-dev.txt)")
    return f"{', '.join(missing)} missing: run `make ui-setup`" if missing else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for(condition, timeout: float, what: str, interval: float = 0.5):
    """``condition()``'s first truthy value, polled until ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s")


class Lab:
    """A JupyterLab server on 127.0.0.1, serving ``root`` (which holds ``notebooks/<the copy>``)."""

    def __init__(self, root: Path):
        self.root, self.port, self.token = root, _free_port(), secrets.token_hex(24)
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = root / "jupyterlab.log"
        settings = root / "lab-settings"
        for plugin, values in LAB_SETTINGS.items():
            path = settings / f"{plugin}.jupyterlab-settings"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))
        env = {key: value for key, value in os.environ.items() if key not in {"MPLBACKEND", "COURSE_RESULTS_DIR"}}
        env |= {
            "COURSE_PRESET": "cpu-ci",
            "HF_HUB_OFFLINE": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
            "JUPYTER_CONFIG_DIR": str(root / "jupyter-config"),  # no user configuration
            "JUPYTER_DATA_DIR": str(root / "jupyter-data"),  # kernels: this environment's only
            "JUPYTER_RUNTIME_DIR": str(root / "jupyter-runtime"),
        }
        command = [
            str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser", "--ip=127.0.0.1",
            f"--port={self.port}", "--port-retries=0", f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={root}", f"--LabApp.user_settings_dir={settings}",
            f"--LabApp.workspaces_dir={root / 'lab-workspaces'}", "--LabApp.expose_app_in_browser=True",
        ]  # fmt: skip
        if os.geteuid() == 0:
            command.append("--allow-root")
        with self.log.open("w") as log:
            self.process = subprocess.Popen(command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)

    def api(self, path: str, method: str = "GET") -> int:
        request = urllib.request.Request(f"{self.url}{path}", method=method)
        request.add_header("Authorization", f"token {self.token}")
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status

    def wait_until_up(self, timeout: float = 300) -> None:
        """Generous: on a busy machine (and under ``nice``) JupyterLab can take minutes to start."""

        def up() -> bool:
            if self.process.poll() is not None:
                raise RuntimeError(f"JupyterLab exited ({self.process.returncode}):\n{self.log_tail()}")
            try:
                return self.api("/api/status") == 200
            except OSError:
                return False

        try:
            _wait_for(up, timeout, "JupyterLab answering on /api/status")
        except TimeoutError as error:
            raise TimeoutError(f"{error}; its log so far:\n{self.log_tail()}") from None

    def stop(self) -> None:
        """Shut down the kernels and the server (POST /api/shutdown), then make sure the process is gone."""
        if self.process.poll() is None:
            try:
                self.api("/api/shutdown", method="POST")
                self.process.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.process.terminate()
                try:
                    self.process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""


@pytest.fixture
def lab(tmp_path):
    if (reason := _missing_browser_tools()) is not None:
        pytest.skip(reason)
    assert NOTEBOOK.is_file(), f"UI_TEST_NOTEBOOK={NOTEBOOK}: no such notebook"
    # the same layout as the repository (notebooks/<name>): outputs/ lands next to the copy, as in make lab, and
    # what a notebook reads from the repository is beside it (08's data/reviews.csv, 09's scripts/ and configs/)
    (tmp_path / "notebooks").mkdir()
    shutil.copy(NOTEBOOK, tmp_path / "notebooks" / NOTEBOOK.name)
    for folder in REPOSITORY_FOLDERS:
        shutil.copytree(REPO_ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    server = Lab(tmp_path)
    try:
        server.wait_until_up()
        yield server
    finally:
        server.stop()


@pytest.fixture
def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for argument in ("--headless=new", "--window-size=1400,1000", "--disable-gpu", "--disable-dev-shm-usage",
                     f"--user-data-dir={tmp_path / 'chromium-profile'}", "--no-first-run"):  # fmt: skip
        options.add_argument(argument)
    if os.geteuid() == 0:
        options.add_argument("--no-sandbox")  # Chromium refuses to run as root with its sandbox
    service = Service(executable_path=shutil.which("chromedriver"), log_output=str(tmp_path / "chromedriver.log"))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_script_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


#: The open notebook as the browser has it: each cell's code (from the model), its prompt and rendered outputs
#: (from the page), and its error outputs (from the model, which is what the page renders).
NOTEBOOK_STATE_JS = """
const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
if (!panel || !panel.content || !panel.content.widgets || !panel.sessionContext) { return null; }
return {
  kernel: panel.sessionContext.kernelDisplayStatus,
  cells: panel.content.widgets.map((cell) => {
    const outputs = cell.model.type === 'code' ? cell.model.outputs.toJSON() : [];
    return {
      type: cell.model.type,
      source: cell.model.sharedModel.getSource(),
      count: cell.model.type === 'code' ? cell.model.executionCount : null,
      prompt: (cell.node.querySelector('.jp-InputArea-prompt') || {}).textContent || '',
      text: Array.from(cell.node.querySelectorAll('.jp-OutputArea-output')).map((n) => n.textContent).join('\\n'),
      images: Array.from(cell.node.querySelectorAll('.jp-OutputArea-output img'))
        .filter((img) => img.complete && img.naturalWidth > 0)
        .map((img) => img.src.slice(0, 22)),
      errors: outputs.filter((o) => o.output_type === 'error').map((o) => `${o.ename}: ${o.evalue}`),
    };
  }),
};
"""


def _state(driver) -> dict | None:
    return driver.execute_script(NOTEBOOK_STATE_JS)


def _cell(state: dict, marker: str) -> tuple[int, dict]:
    found = [(i, c) for i, c in enumerate(state["cells"]) if c["type"] == "code" and marker in c["source"]]
    assert found, f"{NOTEBOOK.name} has no code cell containing {marker!r}"
    return found[-1]


def _running(cell: dict) -> bool:
    return "*" in cell["prompt"]


def _screenshot(driver, name: str, cell_index: int | None = None, show: str | None = None) -> Path:
    """Save what the browser shows; with ``cell_index``, scrolled to that cell, or to the last ``show`` in it."""
    if cell_index is not None:
        driver.execute_script(
            "const cell = window.jupyterapp.shell.currentWidget.content.widgets[arguments[0]].node;"
            "const target = arguments[1] ? [...cell.querySelectorAll(arguments[1])].pop() : null;"
            "(target || cell).scrollIntoView({block: target ? 'center' : 'start'});",
            cell_index,
            show,
        )
        time.sleep(0.5)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{time.strftime('%Y%m%d-%H%M%S')}-{NOTEBOOK.stem}-{name}.png"
    driver.save_screenshot(str(path))
    print(f"screenshot: {path}")
    return path


def _click_menu(driver, menu: str, item: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.XPATH, f"//li[contains(@class,'lm-MenuBar-item')][.//*[text()='{menu}']]").click()
    entry = f"//li[contains(@class,'lm-Menu-item')][.//*[text()='{item}']]"
    _wait_for(lambda: driver.find_elements(By.XPATH, entry), 10, f"{menu} > {item} in the menu")
    driver.find_element(By.XPATH, entry).click()


def test_notebook_runs_in_jupyterlab_and_shows_the_live_plot_and_the_checks(lab, browser):
    started = time.monotonic()
    browser.get(f"{lab.url}/lab/tree/notebooks/{NOTEBOOK.name}?token={lab.token}")
    try:
        # the notebook open, its cells in the page and its kernel started and idle
        _wait_for(lambda: (s := _state(browser)) and s["cells"] and s["kernel"] == "idle", 300,
                  "notebook open with an idle kernel", interval=1)  # fmt: skip
        _click_menu(browser, "Run", "Run All Cells")

        live = any(c["type"] == "code" and PLOT_CELL in c["source"] for c in _state(browser)["cells"])
        plot_shown_while_running = False
        deadline = time.monotonic() + RUN_TIMEOUT
        while True:
            state = _state(browser)
            code = [c for c in state["cells"] if c["type"] == "code"]
            if live:
                plot = _cell(state, PLOT_CELL)[1]
                plot_shown_while_running |= _running(plot) and bool(plot["images"])
            errors = [c for c in code if c["errors"]]
            ran = code[-1]["count"] is not None or errors  # cells after an error are not run
            if ran and state["kernel"] == "idle" and not any(_running(c) for c in code):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"the notebook did not finish within {RUN_TIMEOUT:.0f} s (UI_TEST_TIMEOUT)")
            time.sleep(1)
        print(f"{NOTEBOOK.name} ran in JupyterLab in {time.monotonic() - started:.0f} s")
    except BaseException:
        try:
            _screenshot(browser, "failure")
        finally:
            print(f"JupyterLab's log (last lines):\n{lab.log_tail()}")
        raise

    if live:
        plot_index, plot = _cell(state, PLOT_CELL)
    else:  # 03, 06 and 10-12 plot after training: their last figure stands in for the live plot
        figures = [(i, c) for i, c in enumerate(state["cells"]) if c["type"] == "code" and c["images"]]
        assert figures, f"{NOTEBOOK.name} has no live reward plot and rendered no figure"
        plot_index, plot = figures[-1]
        print(f"{NOTEBOOK.name} draws no live reward plot: checked that its {len(figures)} figure cell(s) rendered")
    checks_index, checks = _cell(state, CHECKS_CELL)
    _screenshot(browser, "plot", plot_index, show="img")  # the (reward) plot, below the cell's other output
    _screenshot(browser, "checks", checks_index, show=".jp-OutputArea-output")  # the PASS lines

    for cell in code:
        assert not cell["errors"], f"cell [{cell['count']}] failed: {cell['errors']}\n{cell['text'][-2000:]}"
        assert "Traceback (most recent call last)" not in cell["text"], f"cell [{cell['count']}]:\n{cell['text']}"
        assert cell["count"] is not None, f"a code cell did not run:\n{cell['source'][:300]}"
    assert plot["images"], f"no rendered image in the training cell:\n{plot['text'][-2000:]}"
    assert all(src.startswith("data:image/png") for src in plot["images"]), plot["images"]
    assert plot_shown_while_running or not live, "the reward plot appeared only after training ended, not live"
    assert "[PASS]" in checks["text"], f"the checks cell shows no PASS line:\n{checks['text']}"
    assert "[FAIL]" not in checks["text"], f"a check failed:\n{checks['text']}"
    assert NOTEBOOK.read_bytes() == (lab.root / "notebooks" / NOTEBOOK.name).read_bytes(), "the copy was saved"
