"""AI: answers decision requests for bot seats (built in the AI issue)."""
