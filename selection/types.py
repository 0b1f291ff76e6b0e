"""The types the proxy shares with selection, in one place: the catalogue and its tools
(and parsing a request's ``tools`` into one), what ``tool_choice`` means, a conversation's
state, the meta-tools, the client's search tool and its results, the plan and its parts.
and every exception selection raises (:mod:`selection.errors`). The front door is
:mod:`selection.planning`; learning from traffic is :mod:`selection.learning`; the offline
evaluation is :mod:`selection.evaluation`. Everything here is defined in the module named
beside it, and documented there."""

from __future__ import annotations

from selection.catalog.body import DecodedBody, decode_object, encode_body, standard_loads
from selection.catalog.cache import CatalogCache
from selection.catalog.catalog import (
    DEFER_LOADING,
    Catalog,
    DeclaredGroup,
    Tool,
    build_catalog,
    canonical_json,
    fingerprint,
    name_words,
    parse_flat_tools,
    parse_function,
    parse_tools,
    without_deferral,
)
from selection.catalog.text_path import text_called_tools
from selection.catalog.text_plan import TextPlan
from selection.catalog.tokens import estimated_tokens
from selection.choosing.block_order import SelectedTool, Selection
from selection.choosing.prefix import TEMPLATE_RESERVE_TOKENS, CacheExpectation
from selection.choosing.seconds import ServerSpeed
from selection.choosing.state import ConversationState, LoadedTool
from selection.clients.bridge import bridge_arguments
from selection.clients.bridge_calls import BridgedCall
from selection.clients.client_deferral import deferred_menu
from selection.clients.meta_tools import MetaTools, free_name
from selection.clients.tool_search import UNAVAILABLE, ClientSearch, SearchResult
from selection.conversation.continuity import RawHistory
from selection.conversation.history import KEEP, ToolChoice, called_tools, read_tool_choice
from selection.conversation.query import content_text
from selection.embedders.protocol import Embedder
from selection.errors import (
    CatalogError,
    EmbedderError,
    EmbedderTimeout,
    IndexPending,
    NothingToPrune,
    PolicyError,
    SelectionError,
    SmallCatalog,
    StateStoreError,
    UnexpectedSelectionError,
    VectorStoreError,
)
from selection.plan import Plan, TurnInput, TurnReading, Upstream

__all__ = [
    "BridgedCall", "CacheExpectation", "Catalog", "CatalogCache", "CatalogError",
    "ClientSearch", "ConversationState", "DEFER_LOADING", "DeclaredGroup", "DecodedBody",
    "Embedder", "EmbedderError", "EmbedderTimeout", "IndexPending", "KEEP", "LoadedTool",
    "MetaTools", "NothingToPrune", "Plan", "PolicyError", "RawHistory", "SearchResult",
    "SelectedTool", "Selection", "SelectionError", "ServerSpeed", "SmallCatalog",
    "StateStoreError", "TEMPLATE_RESERVE_TOKENS", "TextPlan", "Tool", "ToolChoice",
    "TurnInput", "TurnReading", "UNAVAILABLE", "UnexpectedSelectionError", "Upstream",
    "VectorStoreError", "bridge_arguments", "build_catalog", "called_tools",
    "canonical_json", "content_text", "decode_object", "deferred_menu", "encode_body",
    "estimated_tokens", "fingerprint", "free_name", "name_words", "parse_flat_tools",
    "parse_function", "parse_tools", "read_tool_choice", "standard_loads", "text_called_tools",
    "without_deferral",
]
