import os

import pytest

# The whole suite runs offline: nothing may reach the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def course_model():
    """The embedded course model and tokenizer, loaded once (from the shared cache)."""
    from course_utils.models import load_model

    return load_model("embedded", verbose=False)
