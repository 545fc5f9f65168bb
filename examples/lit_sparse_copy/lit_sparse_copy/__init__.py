"""An example task package for lit_sparse: segment copy, registered through an entry point."""

from lit_sparse_copy.segment_copy import SegmentCopyDataModule, segment_copy

__all__ = ["SegmentCopyDataModule", "segment_copy"]
