"""Smoke suite: the plugin's worked example. The plugin makes one test per
check in thresholds/smoke.yaml (test_<check>), plus test_no_regression
(active with --baseline)."""

import pytest

pytestmark = pytest.mark.unlearnbench("smoke")
