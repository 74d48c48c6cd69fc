"""Hudi's metadata table (`.hoodie/metadata`): its timeline, reading it, keeping it in step."""
