"""The three acting APIs, each an adapter of the turn core (:mod:`proxy.turn.adapter`):
Chat Completions (:mod:`proxy.apis.chat`), the Anthropic Messages API
(:mod:`proxy.apis.messages`) and the Responses API (:mod:`proxy.apis.responses`). No API
package imports another."""
