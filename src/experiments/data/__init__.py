"""Layer 4, data: the splits as uint8 tensors or Datasets (built-in, torchvision's, image folders,
your own), the decoded cache, streaming workers, the validation split, and batches on the
device. Imports `core`, `config` and `devices`."""
