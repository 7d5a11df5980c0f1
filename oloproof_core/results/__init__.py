"""Layer 3, the results as data: the one versioned view model every renderer reads (terminal, JSON,
JUnit, Markdown, HTML). Plain dicts; imports only the model and the statistics."""
