"""Generative models of latentlab, one per file, each declared once in NumPyro.

Installed as ``latentlab.models``; import it only under that name.
"""
