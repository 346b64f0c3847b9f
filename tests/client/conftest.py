"""Fixtures of the client tests."""

from tests.client.autostart_support import autostart_home

__all__ = ["autostart_home"]
