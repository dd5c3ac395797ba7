"""The history store, its pytest plugin, trends and change points."""
