"""The tool itself: its contract with the model, validation, the ``todos`` projection.

Nothing here imports a store, a screen, a framework or the host: every other
package builds on this one.
"""

__all__: list[str] = []
