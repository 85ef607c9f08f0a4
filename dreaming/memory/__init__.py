"""Memory: candidates decided into entries, and MEMORY.md kept in agreement with them.

`gates` (which candidates may be promoted), `decisions` (the model's reply schema, prompts and
validation), `lineage` (applying decisions: entries, origins, evidence; code alone owns
provenance), `entry_index` (the search index of live entries), `sanitize` (entry text
hygiene), `memory_file` and `memory_sync` (MEMORY.md parsed, rendered and written across
crashes and human edits), `journal` (undo images), `review` (proposals staged for a person),
`diary` (DREAMS.md). The REM and deep phases (`dreaming.phases`) drive them.
"""
