"""Layer 3, devices: a device request resolved into a plan, and all that depends on the device
the run computes on. Imports `core` and `config`."""
