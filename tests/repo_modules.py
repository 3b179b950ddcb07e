"""The repository's scripts are not a package: load one as a module, by its path from the repository root.

A script is loaded once per test session, under its file name, so that a script importing another
(``from notebook_runner import ...``) gets the same module the tests patch.
"""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO_ROOT = Path(__file__).resolve().parents[1]


def load(relative_path: str) -> ModuleType:
    path = REPO_ROOT / relative_path
    loaded = sys.modules.get(path.stem)
    if loaded is not None and Path(getattr(loaded, "__file__", "")).resolve() == path:
        return loaded
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module
