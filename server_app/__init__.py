"""The server side (ServerApp): labels, top model, strategies driving the parties."""
