"""LLM serving: requests with prompt and output lengths, the iteration-level (continuous)
batching simulator in three layouts, its calibration on the real engine, the real LLM
serving loop, and the study that puts them side by side."""
