"""The engine supervisor's crash-loop limit (5 restarts unless LAKEHOUSE_ENGINE_MAX_RESTARTS says
otherwise) and its Python-forks setting."""

import pytest

from lakehouse_tools.engine import max_restarts


def test_the_limit_is_five_restarts_by_default(monkeypatch):
    monkeypatch.delenv("LAKEHOUSE_ENGINE_MAX_RESTARTS", raising=False)
    assert max_restarts() == 5


def test_the_fault_harness_raises_the_limit_by_the_environment(monkeypatch):
    monkeypatch.setenv("LAKEHOUSE_ENGINE_MAX_RESTARTS", "1000")
    assert max_restarts() == 1000


def test_a_limit_that_is_not_a_number_fails_with_what_to_fix(monkeypatch):
    monkeypatch.setenv("LAKEHOUSE_ENGINE_MAX_RESTARTS", "many")
    with pytest.raises(
        SystemExit,
        match="LAKEHOUSE_ENGINE_MAX_RESTARTS must be a whole number of restarts, not 'many'",
    ):
        max_restarts()


def test_a_python_forks_setting_that_is_not_0_or_1_fails_with_what_to_fix(monkeypatch):
    from lakehouse_tools.engine import forking_workers

    monkeypatch.setenv("LAKEHOUSE_ENGINE_PYTHON_FORKS", "yes")
    with pytest.raises(
        SystemExit,
        match="LAKEHOUSE_ENGINE_PYTHON_FORKS must be 1 \\(fork\\) or 0 \\(do not\\), not 'yes'",
    ):
        forking_workers()
