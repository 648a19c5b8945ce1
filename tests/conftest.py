"""Shared fixtures: the test model zoo, the bundled demo models, a private variant cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.model_zoo import ZOO

ROOT = Path(__file__).resolve().parent.parent
DEMO_TRANSFORMER = ROOT / "resources" / "models" / "demo_transformer.onnx"
DEMO_CNN = ROOT / "resources" / "models" / "demo_cnn.onnx"


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Variants built by tests go to a temporary cache, never the user's."""
    os.environ["OPSCOPE_CACHE_DIR"] = str(tmp_path_factory.mktemp("opscope-cache"))
    # The app's autosaved sessions and QSettings go to temporary folders too.
    os.environ["OPSCOPE_SESSION_DIR"] = str(tmp_path_factory.mktemp("opscope-sessions"))
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path_factory.mktemp("xdg-config"))
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


@pytest.fixture(scope="session")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every model of tests/model_zoo.py, built once per test session."""
    out = tmp_path_factory.mktemp("zoo")
    return {name: build(out) for name, build in ZOO.items()}
