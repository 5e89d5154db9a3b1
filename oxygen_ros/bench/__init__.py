"""Benchmarks: every speed and quality measurement the package prints, side by side in one run."""
