"""The party side (ClientApp): data view, bottom model, and a registry of operations."""
