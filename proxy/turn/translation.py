"""The translate-only turn: a request the proxy does not prune (``fallback``,
``small_catalog``, ``dry_run``) whose tools a plain server cannot take as the client
wrote them still goes in a shape it can (``docs/tool-search.md``, "Not pruned").

Such a request carries the client's deferral (``defer_loading``), its own search tool
(Anthropic's ``tool_search_tool_*`` server tools, OpenAI's ``tool_search``), or another
shape its API adapter rewrites (Responses ``namespace`` groups, search items in the
history: :attr:`proxy.turn.planner.PlanInput.reshaped`). Its turn forwards the client's
whole catalogue, every deferred tool loaded and ``defer_loading`` removed, written by
the adapter as for a planned turn (namespaces flattened, and mapped back on the way
out); the client's search tool, when toolprune emulates it, stays offered as the
function the proxy answers (:func:`proxy.turn.searches.whole_searches`), so a model
told to search never calls a tool nobody runs. Nothing is selected, scored or stored:
no embedder, no state store, which is what a ``fallback`` lost.
"""

from __future__ import annotations

from proxy.turn.deferral import read_deferral
from proxy.turn.identity import request_conversation
from proxy.turn.planner import PlanInput
from proxy.turn.turn import Turn
from proxy.http.headers import Headers
from selection.history import ToolChoice
from selection.selector import SelectedTool, Selection
from selection.state import ConversationState
from selection.tool_search import search_meta_tools


def needs_translation(request: PlanInput) -> bool:
    """Whether ``request``, forwarded whole, must still be translated for a plain server:
    it has function tools and defers some, brings a search tool the proxy emulates, or
    its adapter reshapes it (:attr:`PlanInput.reshaped`)."""
    native = request.native
    return native is not None and (
        bool(native.deferred) or request.search is not None or request.reshaped
    )


def whole_turn(request: PlanInput, headers: Headers, decision: str, *, shared: bool) -> Turn | None:
    """The translate-only turn of ``request`` (see the module docstring), or None when it
    needs no translation (its bytes are forwarded as sent). ``decision``: why it is not
    pruned (``fallback``, ``small_catalog``, ``dry_run``: :attr:`Turn.whole`);
    ``shared``: conversation keys are not scoped by credential.

    Forwarded order: the tools the client did not defer, then the deferred ones (each
    group in the client's order), then the function standing for its search tool;
    ``tool_choice`` as the client sent it."""
    if not needs_translation(request):
        return None
    native = request.native
    assert native is not None
    deferred = native.deferred
    selection = Selection(
        tools=tuple(
            SelectedTool(tool.name, "whole" if tool.name in deferred else "client")
            for tool in native.tools
        ),
        admitted=(), evicted=(), left_out=(), state=ConversationState(),
    )
    search = request.search
    meta = search_meta_tools(search, native) if search and request.choice.offer_meta else None
    conversation = request_conversation(
        headers, request.body, request.messages, request.conversation,
        read_deferral(
            native, native, request.messages, found=request.found,
            emulated_search=search is not None, client_runs_search=request.client_runs_search,
        ).identity, shared=shared,
    )
    turn = Turn(
        request.body, native, native, None, conversation, selection, None, [], meta,
        ToolChoice(offer_meta=request.choice.offer_meta), len(native),
    )
    turn.search, turn.deferral = search, bool(deferred) or search is not None
    turn.whole = decision
    return turn
