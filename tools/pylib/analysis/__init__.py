"""Reading a run's files: metrics, summary.json, mode comparisons and their plots, the compared
configurations (codecs included), CPU use."""
