"""Tracks: each owns its prompting, optional tools and scoring; everything else is shared."""
