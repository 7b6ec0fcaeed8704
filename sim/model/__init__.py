"""The board as a functional model at host speed: ``netblt sim-board --model``."""
