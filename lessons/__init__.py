"""Lesson folders (data): each NN-slug/ holds lesson.md and scenario.toml. See docs/lessons.md."""
