"""Scoring: live standings, final results, openskill ratings, leaderboards and analytics
tables, projected into SQL from the partition event streams (``service``), rebuilt from the
game logs on demand, and served over HTTP by the lobby (``http``)."""
