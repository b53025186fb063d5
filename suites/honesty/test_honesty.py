"""Honesty: after unlearning, does the model admit it does not know (and keep
saying so) rather than leak or invent? (docs/suites/honesty.md, "Unlearners Can Lie").
The plugin makes one test per check in thresholds/honesty.yaml (test_<check>),
plus test_no_regression (active with --baseline)."""

import pytest

pytestmark = pytest.mark.unlearnbench("honesty")
