"""What differs between kinds of device, one `base.Backend` per kind: nothing outside asks "is
this cuda?". Imports nothing, so that `names` is read without torch."""
