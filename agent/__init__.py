"""Proctor's agent side: model clients, the loop, budgets, tracks, scoring, run store and CLI."""

__version__ = "0.1.0"
