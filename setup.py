"""Packaging of the one package tree: ``proctor`` from proctor/, ``proctor.agent`` from agent/,
``proctor.sandbox`` from sandbox/ (issue 26: one path per module, no symlinks).

pyproject.toml holds the metadata; this file only says where each part's folder is, because
pyproject's package discovery cannot put a prefix on the packages it finds. Namespace packages
too, as pyproject's discovery had them: data folders (agent/report/assets/) are packages there.
"""

from __future__ import annotations

from setuptools import find_namespace_packages, setup

PARTS = {"proctor.agent": "agent", "proctor.sandbox": "sandbox"}

setup(
    package_dir={"proctor": "proctor", **PARTS},
    packages=[
        "proctor",
        *(
            name
            for prefix, folder in PARTS.items()
            for name in (
                prefix,
                *(
                    f"{prefix}.{sub}"
                    # agent/report/katex/ holds npm's tree, not Python: its files are package data.
                    for sub in find_namespace_packages(folder, exclude=["*__pycache__*", "report.katex*"])
                ),
            )
        ),
    ],
)
