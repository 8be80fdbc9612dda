"""The ladder: which model at a size. sizes.py (the named presets and the rule that sets each
size's training defaults) and shapes.py (the shape rule: aspect ratio and head ratio at a
parameter count)."""
