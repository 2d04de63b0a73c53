"""The default run's job written as the PyTorch Lightning docs would write it: a LightningModule
and a Trainer with its defaults (progress bar, TensorBoard logger, a checkpoint every epoch, the
sanity check), on the shipped CIFAR-10 sample preloaded as normalized tensors.

Same model (the framework's own class, or torchvision's), optimizer (SGD, lr 0.01),
batch size (64), epochs (10) and evaluation (the test split after every epoch) as
`python train.py [model=...]`; `bench/vs_lightning.py` times the two, whole process against whole
process. Needs Lightning, installed for the benchmarks only (bench/requirements-lightning.txt):

    PYTHONPATH=bench/.lightning python bench/lightning_peer.py --model tudui
    PYTHONPATH=bench/.lightning python bench/lightning_peer.py --model resnet18 --channels-last
"""

from __future__ import annotations

import argparse
import json
import time

import lightning as L
import torch
import torchvision
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from experiments.data.builtin import cifar10_sample
from experiments.data.types import Split
from experiments.training.models import LeNet, Tudui

ARCHITECTURES = {
    "tudui": lambda: Tudui(3, 32, 10),
    "lenet": lambda: LeNet(3, 32, 10),
    "resnet18": lambda: torchvision.models.resnet18(weights=None, num_classes=10),
}


class Classifier(L.LightningModule):
    def __init__(self, model: nn.Module, lr: float) -> None:
        super().__init__()
        self.model = model
        self.lr = lr

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> torch.Tensor:
        images, labels = batch
        loss = F.cross_entropy(self.model(images), labels)
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> None:
        images, labels = batch
        logits = self.model(images)
        self.log("test_loss", F.cross_entropy(logits, labels))
        self.log("test_accuracy", (logits.argmax(1) == labels).float().mean())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.lr)


def preloaded(
    split: Split, batch_size: int, shuffle: bool, memory_format: torch.memory_format
) -> DataLoader:
    """The split as normalized float tensors in memory (mean and std 0.5, as train.py's)."""
    images = ((split.images.float() / 255 - 0.5) / 0.5).contiguous(memory_format=memory_format)
    return DataLoader(TensorDataset(images, split.labels), batch_size=batch_size, shuffle=shuffle)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=list(ARCHITECTURES), default="tudui")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--root", default="lightning_logs", help="Trainer's default_root_dir")
    parser.add_argument(
        "--channels-last",
        action="store_true",
        help="model and images in channels-last, as train.py on the CPU",
    )
    arguments = parser.parse_args()
    memory_format = torch.channels_last if arguments.channels_last else torch.contiguous_format

    started = time.perf_counter()
    L.seed_everything(0)
    train, test = cifar10_sample()
    model = ARCHITECTURES[arguments.model]().to(memory_format=memory_format)
    module = Classifier(model, lr=0.01)
    trainer = L.Trainer(
        max_epochs=arguments.epochs, accelerator="auto", devices=1, default_root_dir=arguments.root
    )
    trainer.fit(
        module,
        preloaded(train, 64, shuffle=True, memory_format=memory_format),
        preloaded(test, 64, shuffle=False, memory_format=memory_format),
    )
    metrics = {name: float(value) for name, value in trainer.callback_metrics.items()}
    print(json.dumps({"seconds_in_main": time.perf_counter() - started, **metrics}))


if __name__ == "__main__":
    main()
