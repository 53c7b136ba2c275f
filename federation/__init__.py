"""Protocol transport: the server's federation interface, payload codec, byte accounting."""

from .federation import Federation, Observer, PartyError
from .local_grid import LocalGrid
from .payload import Payload, decode, encode
from .traffic import DOWN, MB, UP, Traffic, message_bytes

__all__ = [
    "DOWN",
    "MB",
    "UP",
    "Federation",
    "LocalGrid",
    "Observer",
    "PartyError",
    "Payload",
    "Traffic",
    "decode",
    "encode",
    "message_bytes",
]
