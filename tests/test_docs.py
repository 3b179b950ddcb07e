"""Links in the docs point at files and sections that exist (the checklist links every item to a notebook)."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _headings(path: Path) -> list[str]:
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text())["cells"]
        lines = [line for c in cells if c["cell_type"] == "markdown" for line in "".join(c["source"]).splitlines()]
    else:
        lines = path.read_text().splitlines()
    return [line.lstrip("#").strip() for line in lines if re.match(r"#{1,6} ", line)]


def _anchors(path: Path) -> set[str]:
    """Anchors as JupyterLab makes them for notebooks, and as GitHub makes them for markdown."""
    if path.suffix == ".ipynb":
        return {heading.replace(" ", "-") for heading in _headings(path)}
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in _headings(path)}


def _local_links():
    for doc in DOCS:
        for target in LINK.findall(doc.read_text()):
            if not re.match(r"[a-z]+:", target):  # skip http:, https:, mailto:
                yield pytest.param(doc, target, id=f"{doc.name}:{target}")


@pytest.mark.parametrize(("doc", "target"), list(_local_links()))
def test_local_link_resolves(doc, target):
    file_part, _, fragment = target.partition("#")
    path = (doc.parent / file_part).resolve() if file_part else doc
    assert path.exists(), f"{doc.name} links to {file_part}, which does not exist"
    if fragment:
        assert fragment in _anchors(path), f"{doc.name}: no section {fragment!r} in {path.name}"


def test_the_checklist_links_every_item_to_a_notebook_section():
    items = [line for line in (ROOT / "docs" / "CHECKLIST.md").read_text().split("\n- [ ] ")[1:]]
    assert len(items) >= 15
    for item in items:
        assert ".ipynb#" in item or ".md#" in item, f"checklist item without a link to where it is taught: {item[:60]}"
