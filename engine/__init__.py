"""The judged side: launch profiles and the reference engine for MiniMax-H3 Ref2VA."""
