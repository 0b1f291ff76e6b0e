"""The translate-only turn: a request the proxy does not prune (``fallback``,
``small_catalog``, ``dry_run``) whose tools a plain server cannot take as the client
wrote them still goes in a shape it can (``docs/tool-search.md``, "Not pruned").

Such a request carries the client's deferral (``defer_loading``), its own search tool
(Anthropic's ``tool_search_tool_*`` server tools, OpenAI's ``tool_search``), or another
shape its API adapter rewrites (Responses ``namespace`` groups, search items in the
history: :attr:`selection.types.TurnInput.reshaped`). Its turn forwards the client's
whole catalogue, every deferred tool loaded and ``defer_loading`` removed, written by
the adapter as for a planned turn (namespaces flattened, and mapped back on the way
out); the client's search tool, when toolprune emulates it, stays offered as the
function the proxy answers, so a model told to search never calls a tool nobody runs.
Nothing is selected, scored or stored (:meth:`selection.planning.Selector.whole`): no
embedder, no state store, which is what a ``fallback`` lost.
"""

from __future__ import annotations

from proxy.http.headers import Headers
from proxy.turn.identity import request_conversation
from proxy.turn.turn import Turn
from selection.planning import Selector
from selection.types import TurnInput


def whole_turn(
    selector: Selector, request: TurnInput, headers: Headers, decision: str, *, shared: bool
) -> Turn | None:
    """The translate-only turn of ``request`` (see the module docstring), or None when it
    needs no translation (its bytes are forwarded as sent). ``decision``: why it is not
    pruned (``fallback``, ``small_catalog``, ``dry_run``: :attr:`Turn.whole`);
    ``shared``: conversation keys are not scoped by credential."""
    if not request.needs_translation:
        return None
    plan = selector.whole(request)
    conversation = request_conversation(
        headers, request.body, request.messages, request.conversation, plan.reading.identity,
        shared=shared,
    )
    return Turn(plan, conversation, whole=decision)
