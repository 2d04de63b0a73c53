"""What differs between kinds of device, a `base.Backend` each; imports nothing, for `names`."""
