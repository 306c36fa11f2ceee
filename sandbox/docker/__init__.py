"""The docker backend: each call in a locked-down container on a Docker engine (runc or gVisor),
started by the engine or by runc itself (runc-direct), from a warm pool.

Importing this package imports nothing else: the docker SDK loads with the modules that use it.
"""
