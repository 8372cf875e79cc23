"""vpo-evo: evolutionary test-time search with a trained-model backend."""

__version__ = "0.1.0"
