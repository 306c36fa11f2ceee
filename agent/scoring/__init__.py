"""Deterministic scorers (PHYBench EED). Import from agent.scoring.eed."""
