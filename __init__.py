"""vflfs: feature selection in vertical federated learning, built on Flower."""

import warnings

# openmined-psi pins protobuf 6.30, which warns once per generated module of Flower's protobuf
# code (generated with 5.29, one major version older): harmless, and silenced here.
warnings.filterwarnings("ignore", message="Protobuf gencode version", category=UserWarning)

__version__ = "0.1.0"
