"""Layer 3, devices: a device request resolved into a plan, the process group, wrapping for
several GPUs or processes, per-job process settings, placement, precision, memory, timing, and
GPUs for parallel sweep jobs. Imports `core` and `config`."""
