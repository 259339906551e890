"""Deskhand: a desktop assistant that operates the computer with a local vision-language model."""

__version__ = "0.1.0"
