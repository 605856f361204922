"""The speed lab's tests use the same tiny models and fixtures as the project's (tests/conftest.py)."""
from tests.conftest import *  # noqa: F401,F403
