"""Example task containers built with the gepa-runtime container SDK."""
