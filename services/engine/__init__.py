"""Engine: the single writer of every game's event log (built in the backbone issue)."""
