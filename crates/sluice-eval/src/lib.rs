//! Evaluation toolkit: trace readers and the trace-driven simulator (`sluice sim`).
