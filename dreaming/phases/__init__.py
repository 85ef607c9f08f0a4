"""The night's phases, in the order they run: `light` (transcripts into the corpus and
candidates, never an LLM), `rem` (recurring themes and the dream diary), `deep` (candidates
decided into memory). Each drives the stages in `dreaming.ingest` and `dreaming.memory`."""
