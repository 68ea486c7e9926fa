"""The general reliability suite: model-based histories, the crash sweep and concurrency (`make soak` runs them long)."""
