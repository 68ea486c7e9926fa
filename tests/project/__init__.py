"""The project as a whole: import layers, packaging, docs, start-up, the demo."""
