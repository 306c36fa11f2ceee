"""One run: plan, guard, sample workers, error policy, preflight, the runner, progress."""
