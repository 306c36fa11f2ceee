"""The FrontierMath track: python + submit_answer tools, a token budget, verified answer() submissions."""
