"""`NotFusable`: the fusion analyses' answer when a set of ops cannot run as one kernel."""

from __future__ import annotations


class NotFusable(Exception):
    """The ops cannot form one kernel; the message says why."""
