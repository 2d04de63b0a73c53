"""Layer 5, training: models, the loop, schedules, seeding, selection; imports `core` to `data`."""
