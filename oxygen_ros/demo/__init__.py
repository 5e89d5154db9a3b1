"""The trained demo: a procedural tabletop world, its questions and ground truth, training."""
