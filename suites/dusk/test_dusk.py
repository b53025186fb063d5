"""DUSK: selective forgetting under forget/retain overlap (SPEC §2).
One test = one check in thresholds/dusk.yaml (the test name without `test_`)."""

import pytest

pytestmark = pytest.mark.unlearnbench("dusk")


def test_verbatim_forgotten(gate):
    gate.check()


def test_unique_forget_knowledge_removed(gate):
    gate.check()


def test_shared_knowledge_kept(gate):
    gate.check()


def test_unique_retain_knowledge_kept(gate):
    gate.check()


def test_privacy_leakage_near_zero(gate):
    gate.check()


def test_retain_deviation_bounded(gate):
    gate.check()


def test_no_regression(gate):
    gate.no_regression()
