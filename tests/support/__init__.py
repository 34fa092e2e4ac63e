"""Helpers the tests import (conftest.py holds fixtures only): processes, web runtime, engine, browser."""
