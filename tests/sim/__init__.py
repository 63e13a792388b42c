"""Deterministic simulation of the Raft core (TigerBeetle VOPR style); see README.md here."""
