"""Lobby: the public HTTP and WebSocket API (tables, seats, matchmaking, moves, views, the
catalog of games) and the views projection. It knows games only through the registry."""
