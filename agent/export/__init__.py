"""Writing a run in other tools' formats (`proctor export`)."""
