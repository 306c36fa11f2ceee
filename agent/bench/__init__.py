"""Benchmarks of the agent side (`proctor bench loop`, `proctor bench submission`)."""
