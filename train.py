"""Train a model on a dataset, on a device, with a placement method; one folder per run.

    python train.py                      # Tudui, shipped CIFAR-10 sample, best device
    python train.py device=cuda:1 model=tudui
    python train.py model=lenet placement=cuda_call device=cpu
    python train.py -m device=cpu,cuda model=tudui,lenet

The story of a run is `src/experiments/run/train.py`; the configs are in `conf/`.
"""

from experiments.cli import main

if __name__ == "__main__":
    main()
