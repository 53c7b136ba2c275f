"""What a party tells the server when one of its operations fails.

The party logs the full error (message and traceback) on its own machine. The server gets the
operation, the error's type and a message naming the problem and the fix, never the party's file
paths, sample IDs or feature values:

* an error that carries a ``public`` text (:class:`~vflfs.datasets.DataError` raised about the
  party's own file) sends that text;
* any other error of a party that reads its own file (node config ``data-path``: deployment)
  sends only its type and where the details are, since its message may quote the file;
* a party without a file of its own (simulation on a dataset the server also names) sends the
  error's message: it holds nothing the server does not.

The ClientApp's handler lets no ``Exception`` escape, so Flower's own error reply (which carries
``str(exception)`` of whatever escapes a ClientApp) is left to failures outside vflfs's code.
"""

from __future__ import annotations

import logging

from flwr.app import Context

from vflfs.protocol import Failure

log = logging.getLogger("vflfs")


def private_file(context: Context) -> bool:
    """Whether this node reads a file of its own (its node config names a ``data-path``)."""
    return bool(str(context.node_config.get("data-path") or "").strip())


def public_message(error: BaseException, private: bool) -> str:
    """The text of ``error`` that may leave the party."""
    public = getattr(error, "public", None)
    if public:
        return str(public)
    if private:
        return (
            f"the operation raised {type(error).__name__}; the party's log (its SuperNode's "
            "output) has the details"
        )
    return str(error)


def report_failure(context: Context, operation: str, error: BaseException) -> Failure:
    """Log ``error`` in full on this party; return what the server may see."""
    party = context.node_config.get("partition-id", "?")
    log.error("party %s: %r failed", party, operation, exc_info=error)
    return Failure(operation, type(error).__name__, public_message(error, private_file(context)))
