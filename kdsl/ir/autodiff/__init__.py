"""Reverse-mode automatic differentiation of kernels by transformation of the IR.

``activity`` finds the values that depend on the differentiated arguments and those
whose exact values the reverse sweep needs; ``emitter`` builds the gradient function: the
forward sweep (saving loop-carried values per iteration), then the reverse sweep that
walks each structured region backwards; ``rules`` holds the adjoint of each op, attached
to the op registry.
"""
