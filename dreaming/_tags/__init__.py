"""Private implementation of :mod:`dreaming.tags`; import from there, not from here."""
