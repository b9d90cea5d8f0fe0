"""Screens: lesson list, lesson, sandbox, help and modal dialogs. No simpy, no realnet."""
