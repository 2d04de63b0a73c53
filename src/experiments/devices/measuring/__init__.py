"""Measuring the hardware a run computes on: its peak FLOP/s (`peak`, kept by `peak_cache`), the
energy it uses (`energy`, from `energy_counters`), and other work on its cores (`host_load`)."""
