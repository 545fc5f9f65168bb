"""A stand-in source for tests of the kernel's build folder."""

STAND_IN = r"""
#include <Python.h>
#define JOIN_(a, b) a##b
#define JOIN(a, b) JOIN_(a, b)
#define TEXT_(a) #a
#define TEXT(a) TEXT_(a)
static PyModuleDef stand_in = {PyModuleDef_HEAD_INIT, TEXT(TORCH_EXTENSION_NAME), nullptr, -1};
PyMODINIT_FUNC JOIN(PyInit_, TORCH_EXTENSION_NAME)(void) { return PyModule_Create(&stand_in); }
"""
"""An extension with nothing in it: what the loader does with a build folder does not depend
on the source, and this one builds in a second where the kernel takes a minute."""
