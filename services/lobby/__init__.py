"""Lobby: public HTTP and WebSocket API (built in the lobby issue)."""
