"""Closed-form methods as pure jit-compiled JAX functions."""
