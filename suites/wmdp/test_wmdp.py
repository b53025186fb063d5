"""WMDP: hazardous knowledge gone (accuracy near chance, or no better than the
retain model), general knowledge kept (MMLU within a margin of the full
model) (docs/suites/wmdp.md). The plugin makes one test per check in
thresholds/wmdp.yaml (test_<check>), plus test_no_regression (active with
--baseline)."""

import pytest

pytestmark = pytest.mark.unlearnbench("wmdp")
