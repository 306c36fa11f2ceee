"""Human-facing views of a finished run: the offline HTML report and run comparisons.

Everything here reads only what a run directory holds (``samples.jsonl``, ``run.json``,
``summary.json``) so a report can be rebuilt at any time, long after the run.
"""

from proctor.agent.report.loader import RunData, load_run
from proctor.agent.report.page import render_report

__all__ = ["RunData", "load_run", "render_report"]
