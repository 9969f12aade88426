"""Scoring: standings, results, ratings and analytics (built in the scoring issue)."""
