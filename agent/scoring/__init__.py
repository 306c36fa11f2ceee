"""Deterministic scorers (PHYBench EED). Import from proctor.agent.scoring.eed."""
