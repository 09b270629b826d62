"""Shedding strategies (one module each) and the shedding run that drives them (behaviour §4)."""
