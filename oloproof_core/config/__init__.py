"""Layer 5, reading what the user wrote: files, YAML documents, cases, case selection."""
