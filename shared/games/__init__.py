"""Pure game rules, one package per game. No I/O, no clock, no global state."""
