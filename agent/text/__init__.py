"""Text helpers shared by tracks, judges, scoring, the store and every terminal surface."""
