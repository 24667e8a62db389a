"""trident post-processing: read a run's timeline.h5 and checkpoints (see `trident-post --help`)."""
__version__ = "0.1.0"
