"""Statistics of the claims: paired tests, the anytime-valid sequence, corrections across claims, the
words for claims not decided, the shape check, and the decisions the grid's rounds ask for."""
