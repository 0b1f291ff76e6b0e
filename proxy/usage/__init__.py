"""The usage log (``TOOLPRUNE_USAGE_DB``) and the analysis behind ``toolprune usage report``."""
