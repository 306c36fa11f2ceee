"""Proctor's sandbox as an Inspect AI sandbox provider: ``sandbox="proctor"`` (docs/inspect.md).

Inspect loads :mod:`proctor.sandbox.inspect_provider.provider` through the ``inspect_ai`` entry
point (pyproject.toml); that module alone imports Inspect. This package's other modules (the
config parser, the long-lived container, the sweep) import no Inspect, so ``import proctor`` and
``import proctor.sandbox`` never pull Inspect in, and Inspect stays an optional dependency.
"""
