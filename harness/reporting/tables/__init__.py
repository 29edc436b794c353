"""The table reporter: build a table from the records, render it as LaTeX and Markdown, write it."""
