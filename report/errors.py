"""The one error a report raises for bad input: it names the problem and the fix."""

from __future__ import annotations


class ReportError(Exception):
    """No usable run, an unknown column, a bad filter expression: a message for the user."""
