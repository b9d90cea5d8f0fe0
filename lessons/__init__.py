"""Lesson folders (data), installed as the package ``nagle_sim.lesson_files``: each NN-slug/
holds lesson.md and scenario.toml. See docs/lessons.md. Not imported as ``lessons``."""
