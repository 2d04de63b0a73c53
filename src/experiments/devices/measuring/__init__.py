"""Measuring the hardware a run computes on, beside the rest of `devices` (where the step runs):

peak              the FLOP/s of the compute bound, in the run's precision; a run's MFU
peak_cache        the measured peaks kept per user and machine
energy            a span's joules, watts and J/image from the devices' counters
energy_counters   NVML's and RAPL's counters found, or the one line why none
host_load         other work on the run's cores, from /proc
"""
