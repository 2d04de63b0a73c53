"""Layer 9, report (the sweeps layer): the report on a folder of runs, made at the end of every
sweep and on demand. Imports the layers below; reads run folders, never runs them."""
