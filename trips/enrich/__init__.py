"""Enrichments: what BTP says about each day, computed from local map data and the weather forecast.

contract.py is the shape every enrichment works with (a snapshot in, facts out); alerts/ is the catalogue.
"""
