"""Conversation state stores: the proxy's state I/O (selection reads and returns states,
:mod:`selection.planning`; the proxy loads and saves them here)."""
