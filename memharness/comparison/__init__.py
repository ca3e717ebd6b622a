"""`memharness report RUN...`: the strategies side by side on one page, from result files."""
