"""The local backend: each call in a bubblewrap sandbox on the host (weaker isolation), only
when asked for by name.
"""
