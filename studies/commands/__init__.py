"""The studies' commands: ``python -m lit_sparse matrix | probe | coverage | flops | bench``
(entry points of the group ``lit_sparse.commands``)."""
