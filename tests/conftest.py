"""Root test configuration.

Fixtures for the real components live in ``tests/fixtures/`` (one module per component) and are
loaded here as plugins. A test that needs a real component which is not available is *skipped*
on a developer machine but *fails* in CI (``CI=true`` or ``SCALERL_REQUIRE_REAL=1``), so a broken
testbed can never pass silently.
"""

from __future__ import annotations

import os

import pytest

pytest_plugins = [
    "tests.fixtures.real",
    "tests.fixtures.postgres",
    "tests.fixtures.slurm",
]


def pytest_configure(config: pytest.Config) -> None:
    # Keep torch from oversubscribing the 2 cores when several test processes run.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # Sweeps launched by the tests run code from this checkout, which may be edited while the
    # suite runs: a resubmission within a test would then meet "changed code" and, by default,
    # refuse. The suite keeps results and warns instead; tests/integration/test_code_change.py
    # unsets this to test the default.
    os.environ.setdefault("SCALERL_ON_CODE_CHANGE", "reuse")
