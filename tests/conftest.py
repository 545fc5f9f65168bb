"""Suite-wide fixtures: tests never touch the user's token cache or the network."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def isolated_token_cache(tmp_path_factory):
    """One token cache for the whole session (the embedded corpus is tokenized once)."""
    previous = {key: os.environ.get(key) for key in ("LIT_SPARSE_CACHE", "HF_HUB_OFFLINE")}
    os.environ["LIT_SPARSE_CACHE"] = str(tmp_path_factory.mktemp("token_cache"))
    os.environ["HF_HUB_OFFLINE"] = "1"
    yield os.environ["LIT_SPARSE_CACHE"]
    for key, value in previous.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


# The tiny training runs shared by the callbacks, evaluation and notebook tests (tests/ is
# on sys.path as the root conftest's folder).
from tiny_runs import learned_run, staggered_run  # noqa: E402, F401
