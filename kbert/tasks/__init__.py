"""Recipes as importable API: optimizer, metrics, build -> compile -> fit -> evaluate -> write."""
