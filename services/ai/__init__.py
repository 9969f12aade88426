"""AI: bots that decide from a seat's observation only (random and greedy so far)."""

from .bots import BOTS, Bot, GreedyBot, RandomBot, bot

__all__ = ["BOTS", "Bot", "GreedyBot", "RandomBot", "bot"]
