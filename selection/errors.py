"""Every exception the selection library raises.

The proxy catches :class:`SelectionError` (the base) and falls back to forwarding the
full catalogue unchanged; the subclasses say why, for logs and metrics.
:class:`NothingToPrune` and :class:`SmallCatalog` are no failures: the front door's
answers that a request is not pruned.
"""


class SelectionError(Exception):
    """Base class: selection could not be completed; forward the request unchanged."""

    #: Short machine-readable reason, used as the ``reason`` label of fallback metrics.
    reason: str = "selection_error"


class EmbedderError(SelectionError):
    """The embedder failed: model missing, inference error, HTTP error or timeout."""

    reason = "embedder_error"


class EmbedderTimeout(EmbedderError):
    """The embedder did not answer within its time budget."""

    reason = "embedder_timeout"


class IndexPending(EmbedderTimeout):
    """The catalogue's dense index is still being built (past ``index_timeout_s``); the
    build goes on in the background."""

    reason = "index_pending"


class CatalogError(SelectionError):
    """The request's ``tools`` (or ``functions``) could not be understood."""

    reason = "catalog_error"


class StateStoreError(SelectionError):
    """The conversation state store could not be read or written."""

    reason = "state_store_error"


class VectorStoreError(SelectionError):
    """The on-disk store of tool vectors could not be read or written: its vectors are
    embedded instead (never a request's failure)."""

    reason = "vector_store_error"


class NothingToPrune(Exception):
    """The request has no ``tools`` / ``functions`` and no tool block in a system message
    (or nothing its ``allowed_tools`` names is known): it is forwarded as it came."""


class SmallCatalog(Exception):
    """The catalogue is forwarded whole (:meth:`~selection.catalog.policy.Policy.forwards_whole`):
    ``reason`` ``min_catalog_tools`` (at most that many tools) or ``no_saving`` (pruning
    would save less than ``min_saving`` of its schema tokens); ``size``: its tools; ``path``: which
    prompt parts it came from (``native``, ``text``, ``both``)."""

    def __init__(self, size: int, path: str, reason: str) -> None:
        super().__init__(f"{size} tools forwarded whole ({reason})")
        self.size = size
        self.path = path
        self.reason = reason


class PolicyError(ValueError):
    """The policy file is invalid (raised at start-up, never during a request)."""


class UnexpectedSelectionError(SelectionError):
    """Selection failed in a way no other error describes (a defect): the request is
    forwarded unchanged all the same, and the failure is logged and counted."""

    reason = "internal_error"
