"""Loads the harness's pytest plugin; everything else lives in ref2va_accept.plugin."""

pytest_plugins = ["ref2va_accept.plugin"]
