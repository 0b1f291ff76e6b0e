"""Tool selection, no HTTP: the front door (:mod:`selection.planning`), its types, and one folder per
subject; each folder's ``__init__`` says what it holds and what it may import (checked by
``tests/unit/test_import_rules.py``)."""
