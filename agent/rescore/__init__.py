"""`proctor rescore`: grade a finished run's stored answers again, into a new run directory."""
