"""The export tests export the same small research run the re-score tests grade again."""

from tests.rescore.conftest import research_run  # noqa: F401  (a fixture)
