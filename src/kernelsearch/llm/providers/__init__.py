"""Providers: one module per way of getting an answer. Built from spec strings by the registry."""
