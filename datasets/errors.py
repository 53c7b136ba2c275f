"""The one exception type of the datasets package."""


class DataError(ValueError):
    """Bad data or a bad data setting.

    Every message names the problem and the fix, so a user can act on it without reading code.
    """
