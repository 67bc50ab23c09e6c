"""Tests of the consilium: generation pipeline, runner, judging of generated material."""
