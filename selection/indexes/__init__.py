"""What a catalogue is searched by, built once per catalogue: tool texts and their vectors (memory,
disk), the dense (faiss), BM25 and name indexes, query embedding. Imports :mod:`selection.errors`,
:mod:`selection.catalog`, :mod:`selection.embedders`."""
