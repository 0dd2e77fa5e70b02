"""The alert catalogue (catalogue.py) and one module of rules per family."""
