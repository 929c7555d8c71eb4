"""What the example scripts share: data readers (datasets), the three ways to run a script
(backends: r2sp, ddp, single) and the training loop and command line (training)."""
