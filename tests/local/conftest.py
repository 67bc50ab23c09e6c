"""Embedded-model tests share `installed_local_model` from tests/conftest.py."""
