"""Proctor's agent side: model clients, the loop, budgets, tracks, scoring, run store and CLI."""

if __name__ != "proctor.agent":
    # The repository root on sys.path would otherwise give every module a second name
    # (agent.x beside proctor.agent.x) with state of its own: one path per module (issue 26).
    raise ImportError(f"{__name__} is proctor.agent's folder, not a package: import proctor.agent")


__version__ = "0.1.0"
