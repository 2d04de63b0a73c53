"""Layer 1, core: the one error type and one-line messages, atomic writes and file locks, and
text shared by every layer. Imports nothing of the project; no torch."""
