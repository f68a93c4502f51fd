"""The documents stay true to the code."""
