"""Tool pruning for the Responses API (``/v1/responses``) and the Anthropic Messages API
(``/v1/messages``): per-API request and response adapters around the shared planner."""
