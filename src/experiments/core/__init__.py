"""Layer 1, core: errors, files, locks and text for every layer. Imports nothing; no torch."""
