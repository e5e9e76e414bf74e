"""simcluster: discrete-event cluster simulator with real-kernel calibration."""

__version__ = "0.1.0"
