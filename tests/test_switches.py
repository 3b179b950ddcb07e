"""The on/off environment variables (course_utils.switches): read one way, bad values named."""

import pytest

from course_utils.switches import switch


@pytest.mark.parametrize(("value", "expected"), [(None, True), ("", True), ("1", True), (" 1 ", True), ("0", False)])
def test_unset_empty_and_1_are_on_and_0_is_off(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv("GRPO_COURSE_TEST_SWITCH", raising=False)
    else:
        monkeypatch.setenv("GRPO_COURSE_TEST_SWITCH", value)
    assert switch("GRPO_COURSE_TEST_SWITCH", on="go", off="stop") is expected


@pytest.mark.parametrize("value", ["yes", "true", "off", "2"])
def test_any_other_value_names_the_variable_and_both_choices(monkeypatch, value):
    monkeypatch.setenv("GRPO_COURSE_TEST_SWITCH", value)
    expected = rf"GRPO_COURSE_TEST_SWITCH='{value}' is not understood: set it to 1 \(go\) or 0 \(stop\)"
    with pytest.raises(ValueError, match=expected):
        switch("GRPO_COURSE_TEST_SWITCH", on="go", off="stop")
