"""The ray backend: each call on a Ray cluster node's sandbox worker (that node's docker backend).

Importing this package imports nothing else: ray loads with the modules that use it.
"""
