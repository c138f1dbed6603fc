"""The abstract interpreter (the engine): engine.py holds its state and implements `frames.Engine`; its parts
are modules.py, statements.py, expressions.py, branches.py and loops.py, and syntax.py answers questions about
the tree. Import the modules themselves: this package imports nothing, so none of them imports it back."""
