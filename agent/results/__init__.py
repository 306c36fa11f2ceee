"""A run's results: the run store, sample records, the summary and its statistics."""
