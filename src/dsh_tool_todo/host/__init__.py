"""The reference host: a pluggy plugin manager, sessions and projections.

:class:`Host` loads plugins the ``dsh`` way (``inject``, then ``apply``) and
runs their tools against a session log.
"""

from ._host import AsyncMemorySession, Host, HostAgent, HostContext, MemorySession, ToolCall

__all__ = ["AsyncMemorySession", "Host", "HostAgent", "HostContext", "MemorySession", "ToolCall"]
