"""What the conversation says: the retrieval query and its parts, the blocks a client injects
beside the user's words, the tools the history called and ``tool_choice``. Imports nothing of
selection."""
