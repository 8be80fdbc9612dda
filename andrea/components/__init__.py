"""What one run's training loop uses, one concern per module: optim, schedule, checkpoint,
evaluate, clock, runtime (device, precision, signals), distributed, progress."""
