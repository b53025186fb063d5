"""UDS: is the forget knowledge gone from the internals, or only hidden at the
output? (docs/suites/uds.md). The plugin makes one test per check in
thresholds/uds.yaml (test_<check>), plus test_no_regression (active with
--baseline)."""

import pytest

pytestmark = pytest.mark.unlearnbench("uds")
