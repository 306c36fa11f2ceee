"""Text helpers shared by tracks, judges, scoring and the store."""
