"""The store format's test vectors (vectors.json) and the script that checks and rewrites them
(make_vectors.py)."""
