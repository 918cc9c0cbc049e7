"""A module's logger that imports ``logging`` only when something is logged.

Place in the flow: used by the modules a search from the shell runs through (``client``, ``daemon.lifecycle``,
``store.paths``, ``gitrepo``, ``trust``, ``backend``), where importing ``logging`` (with ``traceback``,
``threading`` and ``string`` behind it) is a noticeable part of the command's CPU and a plain search logs nothing.
Everywhere else a module takes ``logging.getLogger(__name__)`` as usual.

Invariant: ``getLogger(name).x`` is ``logging.getLogger(name).x`` for every attribute, so handlers, levels, pytest's
``caplog`` and the daemon's log file see the same records as with a plain logger.
"""

from __future__ import annotations


class _Logger:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, attribute: str):
        import logging

        return getattr(logging.getLogger(self.name), attribute)


def getLogger(name: str) -> _Logger:  # noqa: N802 - the name logging gives it, so call sites read the same
    return _Logger(name)
