"""vflfs: feature selection in vertical federated learning, built on Flower."""

__version__ = "0.1.0"
