"""The test suite, a package: its subfolders import as ``tests.<name>``, so none of them
(``tests/kernels``, ``tests/data``) can stand in for an installed package of that name."""
