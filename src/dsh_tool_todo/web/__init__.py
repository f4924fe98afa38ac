"""The live plan view in the browser (extra ``web``): ``dsh-todo serve SOURCE``.

Importing this package imports no web framework; :mod:`.app` does, when used.
"""

__all__: list[str] = []
