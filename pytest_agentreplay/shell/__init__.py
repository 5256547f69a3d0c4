"""The pytest shell: everything that knows pytest's items, stash and reports. ``plugin.py`` (the entry
point) wires pytest's hooks and fixtures to these modules; the packages beside this one never import it."""
