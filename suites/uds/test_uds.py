"""UDS: is the forget knowledge gone from the internals, or only hidden at the
output? (SPEC §3). One test = one check in thresholds/uds.yaml."""

import pytest

pytestmark = pytest.mark.unlearnbench("uds")


def test_knowledge_erased_in_depth(gate):
    gate.check()


def test_no_regression(gate):
    gate.no_regression()
