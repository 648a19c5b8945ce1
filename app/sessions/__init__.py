"""Session files: recording, the read-only window, compare, exports, compaction."""
