"""Layer 5, training: the models, the training step and evaluation loop, learning-rate schedules,
seeding, and which epoch is selected. Imports the layers below (`core` to `data`)."""
