"""Utility: downstream ability kept, measured by lm-evaluation-harness tasks
through unlearnbench's model interface (docs/suites/utility.md). The plugin makes one test
per check in thresholds/utility.yaml (test_<check>); the checks name the
tasks. Needs --model (the zoo has no lm-eval task) and the lmeval extra."""

import pytest

pytestmark = pytest.mark.unlearnbench("utility")
