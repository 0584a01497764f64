"""Loads the harness's pytest plugin; everything else lives in the ref2va_accept.plugin package."""

pytest_plugins = ["ref2va_accept.plugin"]
