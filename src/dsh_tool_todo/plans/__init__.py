"""A plan, rendered or shipped: the checklist, the reminder, the wire formats, ACP, the fleet tree.

These modules are handed events or plans; none of them opens a store.
"""

__all__: list[str] = []
