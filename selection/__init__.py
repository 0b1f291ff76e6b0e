"""Tool selection: catalogue, embedders, index, query, selector, state, meta-tools. No HTTP."""
