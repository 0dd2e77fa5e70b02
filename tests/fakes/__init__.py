"""Test doubles that speak real protocols (HTTP servers on 127.0.0.1) in place of third-party services."""
