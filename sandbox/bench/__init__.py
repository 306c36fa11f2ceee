"""The sandbox's benchmarks and probes (`proctor bench sandbox`, the lifecycle probe)."""
