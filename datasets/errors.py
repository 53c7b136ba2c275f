"""The one exception type of the datasets package."""


class DataError(ValueError):
    """Bad data or a bad data setting.

    Every message names the problem and the fix, so a user can act on it without reading code.
    ``public``, where given, says the same without the file's paths, IDs or values: the text a
    party sends the server when the error concerns its own file (the full message stays in the
    party's log).
    """

    def __init__(self, message: str, *, public: str | None = None) -> None:
        super().__init__(message)
        self.public = public
