"""How command lines and config files become values: the Lightning commands' parser, one-line
parse errors, space-separated list options, the model of layered config files."""
