"""How every layer writes and reads files: the one atomic writer, YAML loader and Markdown
table printer, and a result computed in a fork."""
