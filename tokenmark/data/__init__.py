"""Packaged reference data: accelerators.csv and models.csv (sources in each row)."""
