"""AI: bots that decide from a seat's observation only (random, greedy and mcts)."""

from .bots import BOTS, Bot, GreedyBot, MctsBot, RandomBot, bot

__all__ = ["BOTS", "Bot", "GreedyBot", "MctsBot", "RandomBot", "bot"]
