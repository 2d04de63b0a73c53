"""The tutorials' training step, shared by the benchmarks that measure against it (a module of
its own, importing only torch, so that importing it times nothing else)."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader


def tutorial_steps(
    model: nn.Module,
    loader: DataLoader,
    device: torch.device,
    loss_fn: nn.Module,
    optimizer: torch.optim.Optimizer,
) -> int:
    """One pass of the tutorials' training steps over `loader`; the images it saw."""
    images_seen = 0
    for images, targets in loader:
        images, targets = images.to(device), targets.to(device)
        loss = loss_fn(model(images), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        loss.item()  # the tutorials log (or print) it every step
        images_seen += len(targets)
    return images_seen
