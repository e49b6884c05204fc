"""Analyses over a function: the CFG, basic blocks, dominance, dataflow, folding, value
numbering, the type and range analysis.
"""
