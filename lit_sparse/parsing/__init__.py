"""How command lines and config files become values: parser, errors, list options, config files."""
