"""One run: its config (file and flags), plan, guard, session lifecycle shared with rescore,
sample workers, error policy, preflight, the runner, progress."""
