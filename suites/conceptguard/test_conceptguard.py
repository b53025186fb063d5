"""ConceptGuard: is harmful use of a dual-use concept removed while its benign
use is kept? (SPEC §5, contextual separation). One test = one check in
thresholds/conceptguard.yaml (the test name without `test_`)."""

import pytest

pytestmark = pytest.mark.unlearnbench("conceptguard")


def test_context_separated(gate):
    gate.check()


def test_harmful_text_not_memorised(gate):
    gate.check()


def test_benign_text_retained(gate):
    gate.check()


def test_benign_queries_answered(gate):
    gate.check()


def test_no_regression(gate):
    gate.no_regression()
