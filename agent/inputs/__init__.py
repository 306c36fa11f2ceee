"""What a run reads: its config, model overrides, input files, tasks and selection."""
