"""Measuring the hardware a run computes on: its peak FLOP/s, energy, and other work on it."""
