"""Proctor."""
