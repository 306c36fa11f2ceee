"""Packaging of the one package tree, proctor/ (docs/architecture.md, "Import names and folders").

proctor/agent and proctor/sandbox are committed symbolic links to the top-level agent/ and
sandbox/, so every import name is a path under proctor/: no remapping, no import hook.
pyproject.toml holds the metadata; this file says where the packages are: ``package_dir={"": "."}`` makes an
editable install a plain path entry (the checkout), which mypy, pyright and jedi read, and a wheel
copies the files the links point to. Namespace packages too, as pyproject's discovery had them:
data folders (agent/report/assets/) are packages there.
"""

from __future__ import annotations

from setuptools import find_namespace_packages, setup

setup(
    package_dir={"": "."},
    packages=[
        "proctor",
        *(
            f"proctor.{name}"
            # Walks proctor/ only, through the links; agent/report/katex/ holds npm's tree, not
            # Python: its files are package data.
            for name in find_namespace_packages("proctor", exclude=["*__pycache__*", "agent.report.katex*"])
        ),
    ],
)
