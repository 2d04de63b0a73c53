"""Layer 4, data: the splits, the decoded cache, streaming workers, the validation split and
batches on the device. Imports `core`, `config` and `devices`."""
