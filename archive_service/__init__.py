"""archive-service: the Archive side of the IBI persistent-URL resolution system."""

__version__ = "0.1.0"
